package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"
)

// floorSocketEnv makes this test binary, started by BenchmarkGRPCFloor,
// serve bare grpc-go on the socket it names instead of running tests.
const floorSocketEnv = "SPICE_ORCH_GRPC_FLOOR_SOCKET"

// serveFloorIfAsked is TestMain's first step: in BenchmarkGRPCFloor's
// server process it serves until its stdin closes, then exits.
func serveFloorIfAsked() {
	sock := os.Getenv(floorSocketEnv)
	if sock == "" {
		return
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	gs := grpc.NewServer()
	pb.RegisterPluginServiceServer(gs, floorServer{})
	go func() {
		io.Copy(io.Discard, os.Stdin) // the benchmark closes it when done
		gs.Stop()
	}()
	fmt.Println("listening")
	if err := gs.Serve(lis); err != nil {
		os.Exit(2)
	}
	os.Exit(0)
}

// floorServer answers Execute with one outcome echoing the arguments.
type floorServer struct {
	pb.UnimplementedPluginServiceServer
}

func (floorServer) Execute(req *pb.ExecuteRequest, st grpc.ServerStreamingServer[pb.ExecuteResponse]) error {
	return st.Send(&pb.ExecuteResponse{Event: &pb.ExecuteResponse_Outcome{Outcome: &pb.Outcome{CallId: req.CallId,
		Outcome: &pb.Outcome_Result{Result: &pb.ToolResult{Content: string(req.ArgumentsJson)}}}}})
}

// BenchmarkGRPCFloor is the floor BenchmarkPluginCall stands on, measured
// in the same run: the same Execute call and answer between two processes
// over a Unix socket, on grpc-go with its defaults, without the launch
// secret, the manifest's bounds, the dispatcher or the typed outcomes.
// On this project's 2-core machine most of either is thread wake-ups.
func BenchmarkGRPCFloor(b *testing.B) {
	dir, err := os.MkdirTemp("", "gf")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), floorSocketEnv+"="+sock)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Error("the floor's server:", err)
		}
	}()
	// One line once it listens; EOF if it died first.
	if _, err := bufio.NewReader(io.LimitReader(stdout, 64)).ReadString('\n'); err != nil {
		b.Fatal("the floor's server did not start:", err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	cl := pb.NewPluginServiceClient(conn)
	req := &pb.ExecuteRequest{CallId: "c1", ToolName: "echo", ArgumentsJson: []byte(`{"text":"hello"}`), TimeoutMillis: 60000}
	ctx := context.Background()
	b.ReportAllocs()
	client0, server0 := cpuTimes(b, cmd.Process.Pid)
	for b.Loop() {
		st, err := cl.Execute(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Recv(); !errors.Is(err, io.EOF) {
			b.Fatal("after the outcome:", err)
		}
	}
	client1, server1 := cpuTimes(b, cmd.Process.Pid)
	b.ReportMetric(float64((client1-client0).Microseconds())/float64(b.N), "host-cpu-µs/op")
	b.ReportMetric(float64((server1-server0).Microseconds())/float64(b.N), "plugin-cpu-µs/op")
}
