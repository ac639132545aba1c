package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Image is the image of the container path.
const Image = "redis:7"

var (
	engineOnce sync.Once
	engine     string
)

// dockerEngine returns the address of a Docker engine that answers /_ping
// within a second, or "" when there is none. It looks where the Docker CLI
// and testcontainers-go look, and asks once per process: testcontainers-go
// itself may wait a long time for an engine that is not there.
func dockerEngine() string {
	engineOnce.Do(func() { engine = findEngine() })
	return engine
}

func findEngine() string {
	var candidates []string
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		candidates = append(candidates, h)
	}
	home, _ := os.UserHomeDir()
	runtime := os.Getenv("XDG_RUNTIME_DIR")
	if runtime == "" {
		runtime = "/run/user/" + strconv.Itoa(os.Getuid())
	}
	for _, p := range []string{
		"/var/run/docker.sock",
		filepath.Join(home, ".docker", "run", "docker.sock"),
		filepath.Join(home, ".docker", "desktop", "docker.sock"),
		filepath.Join(runtime, "docker.sock"),
		filepath.Join(runtime, "podman", "podman.sock"),
	} {
		if _, err := os.Stat(p); err == nil {
			candidates = append(candidates, "unix://"+p)
		}
	}
	for _, c := range candidates {
		if pingEngine(c) {
			return c
		}
	}
	return ""
}

// pingEngine asks the engine at host (unix:// or tcp://) for /_ping. With
// TLS configured only a TCP connection is tried: the handshake needs the
// client's certificates.
func pingEngine(host string) bool {
	u, err := url.Parse(host)
	if err != nil {
		return false
	}
	var network, addr string
	switch u.Scheme {
	case "unix":
		network, addr = "unix", u.Path
	case "tcp":
		network, addr = "tcp", u.Host
		if os.Getenv("DOCKER_TLS_VERIFY") != "" || strings.HasSuffix(u.Host, ":2376") {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return false
			}
			_ = c.Close()
			return true
		}
	default:
		return false // ssh:// and npipe:// cannot be asked quickly
	}
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// startContainer runs Image with the same defaults as a local server
// (no persistence), published on 127.0.0.1 only.
func startContainer(t testing.TB, engine string, opts Options) *Server {
	t.Helper()
	if opts.Sentinel {
		noRedis(t, "Sentinel servers need a local redis-server on PATH: "+HowTo)
	}
	cmd := []string{"redis-server", "--save", "", "--appendonly", "no"}
	for _, line := range opts.Config {
		f := strings.Fields(line)
		if len(f) > 0 {
			cmd = append(cmd, append([]string{"--" + f[0]}, f[1:]...)...)
		}
	}
	cmd = append(cmd, opts.Args...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := testcontainers.Run(ctx, Image,
		testcontainers.WithCmd(cmd...),
		testcontainers.WithExposedPorts("6379/tcp"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort("6379/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1")}},
			}
		}),
		testcontainers.WithWaitStrategy(wait.ForLog("Ready to accept connections").WithStartupTimeout(2*time.Minute)),
	)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("starting %s with the Docker engine at %s: %v", Image, engine, err)
	}
	host, err := c.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	port, err := c.MappedPort(ctx, "6379/tcp")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Addr:      net.JoinHostPort(host, strconv.Itoa(int(port.Num()))),
		Port:      int(port.Num()),
		Container: true,
		t:         t,
		opts:      opts,
	}
	var once sync.Once
	s.stopOnce = func() {
		once.Do(func() {
			s.mu.Lock()
			s.stopped = true
			s.mu.Unlock()
			if err := testcontainers.TerminateContainer(c); err != nil {
				t.Logf("stopping container: %v", err)
			}
		})
	}
	t.Cleanup(s.stopOnce)
	if err := ping(s.Addr, nil); err != nil {
		t.Fatalf("container %s at %s does not answer PING: %v", Image, s.Addr, err)
	}
	return s
}

// Source describes where fresh servers come from, for logs.
func Source() string {
	if Local() {
		return ServerBin() + " from PATH"
	}
	if e := dockerEngine(); e != "" && containerServes() {
		return fmt.Sprintf("%s containers on the Docker engine at %s", Image, e)
	}
	return "none"
}
