package master_test

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// defaultParallel is how many tests of this package run side by side when
// go test is given no -parallel. Its own default, GOMAXPROCS, is 2 on the CI
// machine, but most of these tests wait on three real databases, workers
// on loopback and clocks (fires each second, health probes), not on the
// CPU: at two at a time the package took 13 minutes under -race while the
// whole run kept about one core busy. Run with -parallel N to choose
// otherwise.
const defaultParallel = "4"

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", defaultParallel); err != nil {
			fmt.Fprintln(os.Stderr, "set -test.parallel:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}
