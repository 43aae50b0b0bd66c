package grpctask_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	v1alphapb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
	"github.com/schedulemaster-go/schedulemaster/worker/tasktypes/grpctask"
)

const checkMethod = "grpc.health.v1.Health/Check"

// healthSrv is grpc's standard health service, with a service name
// ("block") whose check waits until the call ends.
type healthSrv struct{ *health.Server }

func (h healthSrv) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if req.GetService() == "block" {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return h.Server.Check(ctx, req)
}

// server is a gRPC server on loopback serving health, recording the
// metadata of each Check call and how many reflection streams it served.
type server struct {
	addr string
	hs   *health.Server

	mu       sync.Mutex
	checks   []metadata.MD
	reflects int
}

func (s *server) calls() ([]metadata.MD, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metadata.MD(nil), s.checks...), s.reflects
}

type reflectMode int

const (
	noReflection reflectMode = iota
	reflectBoth              // v1 and v1alpha
	reflectAlpha             // v1alpha only
)

func startServer(t *testing.T, mode reflectMode, opts ...grpc.ServerOption) *server {
	t.Helper()
	s := &server{hs: health.NewServer()}
	opts = append(opts,
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if info.FullMethod == "/"+checkMethod {
				md, _ := metadata.FromIncomingContext(ctx)
				s.mu.Lock()
				s.checks = append(s.checks, md.Copy())
				s.mu.Unlock()
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if strings.Contains(info.FullMethod, "ServerReflection") {
				s.mu.Lock()
				s.reflects++
				s.mu.Unlock()
			}
			return h(srv, ss)
		}))
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, healthSrv{s.hs})
	switch mode {
	case reflectBoth:
		reflection.Register(gs)
	case reflectAlpha:
		v1alphapb.RegisterServerReflectionServer(gs, reflection.NewServer(reflection.ServerOptions{Services: gs}))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	return s
}

func newExec(t *testing.T) *grpctask.Executor {
	t.Helper()
	ex := grpctask.New(slog.New(slog.DiscardHandler))
	t.Cleanup(func() { _ = ex.Close() })
	return ex
}

func conn(addr string) *protocol.ConnectionSpec {
	return &protocol.ConnectionSpec{Name: "g", Kind: protocol.ConnGRPC, Address: addr}
}

func def(spec *protocol.GRPCSpec, params map[string]string) *protocol.TaskDef {
	spec.Connection = "g"
	if spec.Method == "" {
		spec.Method = checkMethod
	}
	return &protocol.TaskDef{ID: "t1", Title: "grpc", Type: protocol.TaskGRPC, GRPC: spec, Params: params,
		Timeout:  protocol.Duration(10 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}}
}

// healthSet is the health proto's FileDescriptorSet, base64, as
// protoc --descriptor_set_out would write it.
func healthSet(t *testing.T) string {
	t.Helper()
	set := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{protodesc.ToFileDescriptorProto(healthpb.File_grpc_health_v1_health_proto)}}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func TestExecutorGRPCReflectedCallRepliesJSONWithMetadataAndBearer(t *testing.T) {
	t.Parallel()
	s := startServer(t, reflectBoth)
	s.hs.SetServingStatus("orders.prod", healthpb.HealthCheckResponse_SERVING)
	s.hs.SetServingStatus("orders.test", healthpb.HealthCheckResponse_NOT_SERVING)
	ex := newExec(t)
	cn := conn(s.addr)
	cn.Secret = "bearer-tok-s3cret"
	const runs = 3
	for i := range runs {
		d := def(&protocol.GRPCSpec{Request: `{"service":"orders.{{ENV}}"}`, Metadata: map[string]string{"x-trace": "t-{{ID}}"}},
			map[string]string{"ENV": "prod", "ID": "42"})
		res, out := executortest.Run(t, ex, d, cn, 5*time.Second)
		if res.Result != protocol.ResultSuccess || out != `{"status":"SERVING"}` {
			t.Fatalf("run %d: %s %q, want success {\"status\":\"SERVING\"}", i, res.Result, out)
		}
		executortest.NoSecret(t, out, cn.Secret)
		if n := ex.Len(); n != 1 {
			t.Fatalf("pool holds %d connections after run %d, want 1", n, i)
		}
	}
	checks, reflects := s.calls()
	if len(checks) != runs {
		t.Fatalf("server saw %d calls, want exactly %d (one per run)", len(checks), runs)
	}
	for _, md := range checks {
		if got := md.Get("x-trace"); len(got) != 1 || got[0] != "t-42" {
			t.Fatalf("x-trace metadata = %v, want [t-42]", got)
		}
		if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+cn.Secret {
			t.Fatalf("authorization metadata = %v, want the bearer secret", got)
		}
	}
	if reflects != 1 {
		t.Fatalf("%d reflection streams for %d runs, want 1 (the method's description cached)", reflects, runs)
	}
	// The other status, params expanded.
	res, out := executortest.Run(t, ex, def(&protocol.GRPCSpec{Request: `{"service":"orders.{{ENV}}"}`}, map[string]string{"ENV": "test"}), cn, 5*time.Second)
	if res.Result != protocol.ResultSuccess || out != `{"status":"NOT_SERVING"}` {
		t.Fatalf("%s %q", res.Result, out)
	}
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	if n := ex.Len(); n != 0 {
		t.Fatalf("pool holds %d connections after Close", n)
	}
}

func TestExecutorGRPCStatusNotFoundFails(t *testing.T) {
	t.Parallel()
	s := startServer(t, reflectBoth)
	res, out := executortest.Run(t, newExec(t), def(&protocol.GRPCSpec{Request: `{"service":"no.such.Service"}`}, nil), conn(s.addr), 5*time.Second)
	if res.Result != protocol.ResultFailed || out != "rpc error: code = NotFound desc = unknown service" {
		t.Fatalf("%s %q, want failed NotFound", res.Result, out)
	}
}

func TestExecutorGRPCBadRequestOrMethodFails(t *testing.T) {
	t.Parallel()
	s := startServer(t, reflectBoth)
	ex := newExec(t)
	for _, tc := range []struct{ method, request, want string }{
		{checkMethod, `{"nope":1}`, `request is not a grpc.health.v1.HealthCheckRequest`},
		{"grpc.health.v1.Health/Nope", `{}`, "service grpc.health.v1.Health has no method Nope"},
		{"grpc.health.v1.Health/Watch", `{}`, "only unary methods"},
		{"no.Such/Method", `{}`, "describe no.Such by reflection"},
	} {
		res, out := executortest.Run(t, ex, def(&protocol.GRPCSpec{Method: tc.method, Request: tc.request}, nil), conn(s.addr), 5*time.Second)
		if res.Result != protocol.ResultFailed || !strings.Contains(out, tc.want) {
			t.Fatalf("%s %s: %s %q, want failed %q", tc.method, tc.request, res.Result, out, tc.want)
		}
	}
}

func TestExecutorGRPCBlockingHandlerTimesOut(t *testing.T) {
	t.Parallel()
	s := startServer(t, reflectBoth)
	start := time.Now()
	res, out := executortest.Run(t, newExec(t), def(&protocol.GRPCSpec{Request: `{"service":"block"}`}, nil), conn(s.addr), 300*time.Millisecond)
	if res.Result != protocol.ResultTimeout || !strings.Contains(out, "no reply within 300ms: rpc error: code = DeadlineExceeded") {
		t.Fatalf("%s %q, want timeout", res.Result, out)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timeout took %s", d)
	}
}

func TestExecutorGRPCDescriptorSetWithoutReflection(t *testing.T) {
	t.Parallel()
	s := startServer(t, noReflection)
	ex := newExec(t)
	d := def(&protocol.GRPCSpec{Request: `{}`, DescriptorSet: healthSet(t)}, nil)
	if err := ex.Validate(&executor.Task{Def: d}); err != nil {
		t.Fatal(err)
	}
	res, out := executortest.Run(t, ex, d, conn(s.addr), 5*time.Second)
	if res.Result != protocol.ResultSuccess || out != `{"status":"SERVING"}` {
		t.Fatalf("%s %q", res.Result, out)
	}
	// Without the set, the server's missing reflection is the reason.
	res, out = executortest.Run(t, ex, def(&protocol.GRPCSpec{Request: `{}`}, nil), conn(s.addr), 5*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "no reflection service") {
		t.Fatalf("%s %q, want failed: no reflection", res.Result, out)
	}
	msg, err := ex.Test(context.Background(), conn(s.addr))
	if err != nil || !strings.HasPrefix(msg, "reachable, no reflection service") {
		t.Fatalf("Test = %q, %v", msg, err)
	}
	// A set that does not describe the method fails at once.
	bad := def(&protocol.GRPCSpec{Method: "other.Svc/Do", DescriptorSet: healthSet(t)}, nil)
	if err := ex.Validate(&executor.Task{Def: bad}); err == nil || !strings.Contains(err.Error(), "other.Svc") {
		t.Fatalf("Validate of a set without the service: %v", err)
	}
}

func TestExecutorGRPCReflectionV1AlphaFallback(t *testing.T) {
	t.Parallel()
	s := startServer(t, reflectAlpha)
	ex := newExec(t)
	res, out := executortest.Run(t, ex, def(&protocol.GRPCSpec{}, nil), conn(s.addr), 5*time.Second)
	if res.Result != protocol.ResultSuccess || out != `{"status":"SERVING"}` {
		t.Fatalf("%s %q", res.Result, out)
	}
	if msg, err := ex.Test(context.Background(), conn(s.addr)); err != nil || msg != "services: grpc.health.v1.Health" {
		t.Fatalf("Test = %q, %v", msg, err)
	}
}

func TestExecutorGRPCDownServerFailsQuickly(t *testing.T) {
	t.Parallel()
	ex := newExec(t)
	cn := conn(executortest.ClosedPort(t))
	cn.Secret = "down-s3cret"
	start := time.Now()
	for _, set := range []string{"", healthSet(t)} {
		res, out := executortest.Run(t, ex, def(&protocol.GRPCSpec{DescriptorSet: set}, nil), cn, 5*time.Second)
		if res.Result != protocol.ResultFailed || !strings.Contains(out, "code = Unavailable") || !strings.Contains(out, "connection refused") {
			t.Fatalf("%s %q, want failed Unavailable: connection refused", res.Result, out)
		}
		executortest.NoSecret(t, out, cn.Secret)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a down server took %s to fail", d)
	}
	if _, err := ex.Test(context.Background(), cn); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Test of a down server: %v", err)
	} else {
		executortest.NoSecret(t, err.Error(), cn.Secret)
	}
}

func TestExecutorGRPCBearerRefusedInClearToARemoteHost(t *testing.T) {
	t.Parallel()
	ex := newExec(t)
	cn := conn("192.0.2.1:443") // TEST-NET-1: never dialled
	cn.Secret = "remote-s3cret"
	res, out := executortest.Run(t, ex, def(&protocol.GRPCSpec{}, nil), cn, time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "no TLS") {
		t.Fatalf("%s %q, want failed: bearer without TLS", res.Result, out)
	}
	executortest.NoSecret(t, out, cn.Secret)
	if _, err := ex.Test(context.Background(), cn); err == nil {
		t.Fatal("Test sent a bearer in clear")
	}
}

func TestExecutorGRPCOverTLS(t *testing.T) {
	t.Parallel()
	cert, caPEM := selfSigned(t)
	s := startServer(t, reflectBoth, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	ex := newExec(t)
	cn := conn(s.addr)
	cn.Secret = "tls-tok"
	cn.TLS = &protocol.ConnectionTLS{Enabled: true, CA: caPEM}
	res, out := executortest.Run(t, ex, def(&protocol.GRPCSpec{}, nil), cn, 5*time.Second)
	if res.Result != protocol.ResultSuccess || out != `{"status":"SERVING"}` {
		t.Fatalf("%s %q", res.Result, out)
	}
	checks, _ := s.calls()
	if len(checks) != 1 || checks[0].Get("authorization")[0] != "Bearer tls-tok" {
		t.Fatalf("calls %v", checks)
	}
	if msg, err := ex.Test(context.Background(), cn); err != nil || msg != "services: grpc.health.v1.Health" {
		t.Fatalf("Test = %q, %v", msg, err)
	}
	// Without the CA, the server's certificate is refused.
	cn2 := conn(s.addr)
	cn2.TLS = &protocol.ConnectionTLS{Enabled: true}
	res, out = executortest.Run(t, ex, def(&protocol.GRPCSpec{}, nil), cn2, 5*time.Second)
	if res.Result != protocol.ResultFailed || !strings.Contains(out, "certificate") {
		t.Fatalf("%s %q, want failed: certificate", res.Result, out)
	}
}

// selfSigned is a certificate for 127.0.0.1 and its PEM, as its own CA.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "grpctask test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestExecutorGRPCTestListsServices(t *testing.T) {
	t.Parallel()
	s := startServer(t, reflectBoth)
	msg, err := newExec(t).Test(context.Background(), conn(s.addr))
	if err != nil || msg != "services: grpc.health.v1.Health" {
		t.Fatalf("Test = %q, %v", msg, err)
	}
}
