// Command kubelet-exec is the pod-exec part of the simulated control-plane kubelets' API (issue
// 12, item 5): the endpoint kube-apiserver proxies `pods/exec` to, served by the kubelet's own
// streaming code (k8s.io/kubelet/pkg/cri/streaming/remotecommand, the package a real kubelet's
// CRI streaming server runs), so the SPDY or WebSocket session the real kube-apiserver opens is
// judged by the code a real node runs.
//
// It is ours (agent-day2's), not upstream's: a main package in the wrapper module
// tests/real/kube, built by scripts/real-components.sh kube next to the control plane.
//
// Routes, as the kubelet serves them (pkg/kubelet/server): GET/POST
// /exec/{namespace}/{pod}/{container} and /exec/{namespace}/{pod}/{uid}/{container}, query
// command=ARG (repeated), stdin=1, stdout=1, stderr=1, tty=1; GET
// /containerLogs/{namespace}/{pod}/{container} (empty: the stand-in containers log nothing);
// GET /healthz.
//
// The "container runtime" behind it is a program (-runtime, with -runtime-arg values before
// the request's): it is run as `RUNTIME ARGS... NAMESPACE POD CONTAINER -- COMMAND...` with the
// session's stdin, stdout and stderr, and its exit status is the command's (a non-zero one is
// reported as reason NonZeroExitCode, as the kubelet does). agent-day2-sim's `container-exec`
// is that program.
//
// Authentication: TLS with a client certificate the -client-ca signed (kube-apiserver's
// --kubelet-client-certificate). A real kubelet also authorizes the request with a
// SubjectAccessReview (nodes/proxy); this one does not.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
	streaming "k8s.io/kubelet/pkg/cri/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// The kubelet's defaults (KubeletConfiguration streamingConnectionIdleTimeout; the CRI
// streaming server's DefaultStreamCreationTimeout).
const (
	idleTimeout           = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runtime runs each command as a program of the host (see the package documentation).
type runtime struct {
	program string
	args    []string
}

// ExecInContainer implements streaming.Executor. `name` is "NAMESPACE/POD".
func (r runtime) ExecInContainer(ctx context.Context, name string, _ types.UID, container string, cmd []string,
	in io.Reader, out, errw io.WriteCloser, tty bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	ns, pod, _ := strings.Cut(name, "/")
	argv := append(append(append([]string{}, r.args...), ns, pod, container, "--"), cmd...)
	c := exec.CommandContext(ctx, r.program, argv...)
	if out != nil {
		c.Stdout = out
	}
	if errw != nil {
		c.Stderr = errw
	} else if tty && out != nil {
		// With a terminal, stderr is merged into stdout (there is no stderr stream).
		c.Stderr = out
	}
	if in != nil {
		// A pipe of our own: Wait then does not wait for a client that never closes stdin.
		w, err := c.StdinPipe()
		if err != nil {
			return err
		}
		go func() {
			_, _ = io.Copy(w, in)
			_ = w.Close()
		}()
	}
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if code < 0 {
			code = 128 + 9 // killed by a signal
		}
		return utilexec.CodeExitError{Err: fmt.Errorf("error executing command %v, exit code %d", cmd, code), Code: code}
	}
	return err
}

func main() {
	var listen, runtimeArgs listFlag
	flag.Var(&listen, "listen", "IP:PORT to serve on (repeatable)")
	cert := flag.String("tls-cert-file", "", "serving certificate (PEM)")
	key := flag.String("tls-private-key-file", "", "its key (PEM)")
	clientCA := flag.String("client-ca-file", "", "CA that signs the clients' certificates (PEM)")
	program := flag.String("runtime", "", "the program that runs each command")
	flag.Var(&runtimeArgs, "runtime-arg", "an argument of -runtime before the request's (repeatable)")
	flag.Parse()
	if len(listen) == 0 || *cert == "" || *key == "" || *clientCA == "" || *program == "" {
		log.Fatal("kubelet-exec: -listen, -tls-cert-file, -tls-private-key-file, -client-ca-file and -runtime are required")
	}
	pem, err := os.ReadFile(*clientCA)
	if err != nil {
		log.Fatalf("kubelet-exec: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		log.Fatalf("kubelet-exec: no certificate in %s", *clientCA)
	}
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		log.Fatalf("kubelet-exec: %v", err)
	}
	rt := runtime{program: *program, args: runtimeArgs}

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	serve := func(w http.ResponseWriter, req *http.Request) {
		ns, pod, container := req.PathValue("ns"), req.PathValue("pod"), req.PathValue("container")
		opts, err := streaming.NewOptions(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		cmd := req.URL.Query()["command"]
		log.Printf("exec %s/%s/%s %q (stdin %v stdout %v stderr %v tty %v; upgrade %s, protocols %v)", ns, pod, container, cmd,
			opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY, req.Header.Get("Upgrade"), req.Header.Values("X-Stream-Protocol-Version"))
		streaming.ServeExec(w, req, rt, ns+"/"+pod, types.UID(req.PathValue("uid")), container, cmd, opts,
			idleTimeout, streamCreationTimeout, remotecommandconsts.SupportedStreamingProtocols)
	}
	// Container logs: the stand-in containers write none (an empty log, as for a container
	// that printed nothing).
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
	})
	for _, m := range []string{"GET", "POST"} {
		mux.HandleFunc(m+" /exec/{ns}/{pod}/{container}", serve)
		mux.HandleFunc(m+" /exec/{ns}/{pod}/{uid}/{container}", serve)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
		// HTTP/1.1 only: the streams are connection upgrades.
		NextProtos: []string{"http/1.1"},
	}
	// An address that is not local here (a node's second InternalIP, e.g. IPv6 where only
	// IPv4 is on loopback) is skipped: kube-apiserver dials the first InternalIP.
	errs := make(chan error, len(listen))
	serving := 0
	for _, addr := range listen {
		l, err := net.Listen("tcp", addr)
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			log.Printf("kubelet-exec: not serving %s: not an address of this network namespace", addr)
			continue
		}
		if err != nil {
			log.Fatalf("kubelet-exec: %v (another cluster in this network namespace serves it? each cluster needs its own: agent-day2-sim netns)", err)
		}
		srv := &http.Server{Handler: mux, TLSConfig: cfg, ReadHeaderTimeout: 30 * time.Second}
		go func() { errs <- srv.ServeTLS(l, "", "") }()
		log.Printf("kubelet-exec: serving https://%s", addr)
		serving++
	}
	if serving == 0 {
		log.Fatalf("kubelet-exec: none of the addresses %v is local here: run inside agent-day2-sim netns, whose loopback carries the machine network", []string(listen))
	}
	log.Fatalf("kubelet-exec: %v", <-errs)
}
