package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// sweepTimeout is the per-probe timeout of the sweep scenario.
const sweepTimeout = time.Second

// sweepFleet is a fleet of endpoints with its nodes in a SQLite store.
type sweepFleet struct {
	f    *fleet
	st   *store.Store
	n    int
	hung []string
	note string
}

func (b *bench) newSweepFleet(ctx context.Context, n, hungEvery int, dir string, conc int) (*sweepFleet, error) {
	limit := raiseNoFile()
	// A listener per worker, and with keep-alive both sides of an idle
	// connection to every worker (the probe client has no global cap on idle
	// connections), plus both sides of the probes in flight.
	need := 3*uint64(n) + 2*uint64(conc) + 256
	keepAlive := limit >= need
	f, err := startFleet(n, hungEvery, "smbench-boot", keepAlive)
	if err != nil {
		return nil, fmt.Errorf("%w (open files limit %d)", err, limit)
	}
	log, _ := b.newLogger()
	st, err := openSQLite(ctx, dir, log)
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := insertNodes(ctx, st.DB, f.Nodes); err != nil {
		f.Close()
		st.Close()
		return nil, err
	}
	sf := &sweepFleet{f: f, st: st, n: n, hung: f.HungNames()}
	if !keepAlive {
		sf.note = fmt.Sprintf("; keep-alive off: open files limit %d < %d", limit, need)
	}
	return sf, nil
}

func (s *sweepFleet) Close() {
	s.f.Close()
	s.st.Close()
}

// reset puts every worker back to running; hung nodes start with preFail failures.
func (s *sweepFleet) reset(ctx context.Context, preFail int) error {
	_, err := s.st.DB.NewUpdate().Model((*store.Node)(nil)).
		Set("status = ?", store.StatusRunning).Set("failures = 0").Set("reason = ''").
		Where("type = ?", store.TypeWorker).Exec(ctx)
	if err != nil || preFail == 0 || len(s.hung) == 0 {
		return err
	}
	_, err = s.st.DB.NewUpdate().Model((*store.Node)(nil)).Set("failures = ?", preFail).
		Where("name IN (?)", bun.In(s.hung)).Exec(ctx)
	return err
}

// sweeps runs `runs` sweeps of a fresh master with the given probe concurrency
// and returns their wall times and results.
func (b *bench) sweeps(ctx context.Context, s *sweepFleet, conc, preFail, runs int) ([]time.Duration, []master.SweepResult, error) {
	log, _ := b.newLogger()
	m := master.New(master.Config{
		Identity: "master", ClusterKey: benchClusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour, Timeout: sweepTimeout, MaxFailures: 3, Concurrency: conc},
	}, s.st, log)
	var took []time.Duration
	var res []master.SweepResult
	for i := 0; i < runs; i++ {
		if err := s.reset(ctx, preFail); err != nil {
			return nil, nil, err
		}
		settle()
		t0 := time.Now()
		r := m.Sweep(ctx)
		took = append(took, time.Since(t0))
		res = append(res, r)
	}
	return took, res, nil
}

// sweepCheck says what in a result differs from the expectation.
func sweepCheck(res []master.SweepResult, n, hung int, offline bool) string {
	for _, r := range res {
		if r.Probed != n || r.Healthy != n-hung || r.Failed != hung || (offline && r.WentOffline != hung) {
			return fmt.Sprintf("; UNEXPECTED: probed %d healthy %d failed %d offline %d", r.Probed, r.Healthy, r.Failed, r.WentOffline)
		}
	}
	return ""
}

func (b *bench) sweepScenario(ctx context.Context) []row {
	var rows []row
	runs := b.opt.Runs
	def := 256 // master.HealthConfig default

	// 1,000 workers with 10% hung.
	n1 := b.pick(1000, 200)
	name1 := fmt.Sprintf("health sweep: %s workers, 10%% hung", fmtInt(n1))
	target1 := fmt.Sprintf("≤ 1.5 × probe timeout (%s)", fmtDur(sweepTimeout))
	sf, err := b.newSweepFleet(ctx, n1, 10, filepath.Join(b.tmp, "sweep1k"), def)
	if err != nil {
		return append(rows, errRow(name1, err))
	}
	hung := len(sf.hung)
	concs := []int{def}
	if !b.opt.Short {
		concs = []int{def, 64, 1024}
	}
	for _, conc := range concs {
		for _, offline := range []bool{false, true} {
			preFail, label := 0, "1st failure counted"
			if offline {
				preFail, label = 2, "3rd failure: hung ones go offline"
			}
			took, res, err := b.sweeps(ctx, sf, conc, preFail, runs)
			name := fmt.Sprintf("%s (%s)", name1, label)
			if conc != def {
				name = fmt.Sprintf("  same, probe concurrency %d (%s)", conc, label)
			}
			if err != nil {
				rows = append(rows, errRow(name, err))
				continue
			}
			med := medianDur(took)
			fig := fmt.Sprintf("%s = %.2f× timeout (concurrency %d, max %s)%s%s", fmtDur(med),
				float64(med)/float64(sweepTimeout), conc, fmtDur(maxDur(took)), sweepCheck(res, n1, hung, offline), sf.note)
			v := verdict(med <= sweepTimeout*3/2)
			if conc != def {
				v = Info
			}
			rows = append(rows, row{name, fig, target1, v})
		}
	}
	sf.Close()
	settle()

	// 10,000 healthy workers.
	n2 := b.pick(10000, 500)
	name2 := fmt.Sprintf("health sweep: %s healthy workers", fmtInt(n2))
	for _, conc := range concs {
		sf, err := b.newSweepFleet(ctx, n2, 0, filepath.Join(b.tmp, fmt.Sprintf("sweep10k-%d", conc)), max(conc, def))
		if err != nil {
			rows = append(rows, errRow(name2, err))
			break
		}
		// The first sweep of a master opens every connection; later ones reuse
		// up to 4,096 idle keep-alive connections.
		took, res, err := b.sweeps(ctx, sf, conc, 0, runs+1)
		sf.Close()
		settle()
		name := name2
		if conc != def {
			name = fmt.Sprintf("  same, probe concurrency %d", conc)
		}
		if err != nil {
			rows = append(rows, errRow(name, err))
			continue
		}
		cold, warm := took[0], took[1:]
		med := medianDur(warm)
		fig := fmt.Sprintf("%s (concurrency %d; first sweep, all new connections: %s)%s%s", fmtDur(med), conc,
			fmtDur(cold), sweepCheck(res, n2, 0, false), sf.note)
		v := verdict(med < 2*time.Second && cold < 2*time.Second)
		if conc != def {
			v = Info
		}
		rows = append(rows, row{name, fig, "< 2 s", v})
	}
	return rows
}
