package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate/internal/redisserver"
	"github.com/redisrate/redisrate/scripts"
)

// docServer starts redis-server on a free 127.0.0.1 port with extra
// arguments (and environment), waits until it answers, and stops it when
// the test ends. With tlsDir, it listens with TLS only, with the
// certificates made by docCerts there.
func docServer(t *testing.T, env []string, tlsDir string, args ...string) string {
	t.Helper()
	bin := serverBin(t, "redis-server", "apt-get install redis-server")
	dir := t.TempDir()
	return startServer(t, redisserver.Options{Bin: bin, Bus: true, Env: env, Args: func(port int) []string {
		base := append(redisserver.Port(port), redisserver.NoPersistence(dir)...)
		if tlsDir != "" {
			base = append(base, "--port", "0", "--tls-port", strconv.Itoa(port), "--tls-auth-clients", "no",
				"--tls-cert-file", filepath.Join(tlsDir, "redis.crt"), "--tls-key-file", filepath.Join(tlsDir, "redis.key"),
				"--tls-ca-cert-file", filepath.Join(tlsDir, "ca.crt"))
		}
		return append(base, args...)
	}})
}

// serverBin finds a server on PATH, or skips t, except under CI, which
// must install it (install says how, on Debian).
func serverBin(t *testing.T, name, install string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		redisserver.Missing(t, "%s is not on PATH: install it (Debian: %s) to run these tests", name, install)
	}
	return bin
}

// valkeyServer starts valkey-server as docServer starts redis-server.
func valkeyServer(t *testing.T, args ...string) string {
	t.Helper()
	bin := serverBin(t, "valkey-server", "apt-get install -t bookworm-backports valkey-server")
	dir := t.TempDir()
	return startServer(t, redisserver.Options{Bin: bin, Args: func(port int) []string {
		return append(append(redisserver.Port(port), redisserver.NoPersistence(dir)...), args...)
	}})
}

func docClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// doctorRun runs "redisrate doctor" in-process and returns its exit code,
// stdout and stderr.
func doctorRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"doctor"}, args...), &out, &errb)
	t.Logf("redisrate doctor %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// wantLine fails t unless out has a line of check at level (ok, warn,
// FAIL) that matches re.
func wantLine(t *testing.T, out, level, check, re string) {
	t.Helper()
	rx := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(level) + `\s+` + regexp.QuoteMeta(check) + `\s+.*` + re)
	if !rx.MatchString(out) {
		t.Errorf("no %q line for %q matching %q in:\n%s", level, check, re, out)
	}
}

func TestDoctorMaxmemoryPolicy(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"allkeys-lru", "volatile-lru"} {
		addr := docServer(t, nil, "", "--maxmemory", "64mb", "--maxmemory-policy", policy)
		code, out, _ := doctorRun(t, "--redis", addr)
		if code != exitProblem {
			t.Errorf("%s: exit %d, want %d", policy, code, exitProblem)
		}
		wantLine(t, out, "FAIL", "maxmemory", policy+` with maxmemory 64 MB: .*silently resets .*set maxmemory-policy noeviction`)
	}
	addr := docServer(t, nil, "", "--maxmemory", "64mb", "--maxmemory-policy", "noeviction", "--appendonly", "yes")
	code, out, _ := doctorRun(t, "--redis", addr)
	wantLine(t, out, "ok", "maxmemory", "noeviction with maxmemory 64 MB: .*FCALL of the library is refused with OOM even for a denial: a client then asks the _ro function \\(a check\\) or EVALSHA")
	wantLine(t, out, "ok", "persistence", "AOF on")
	if code != 0 {
		t.Errorf("noeviction with AOF, standalone: exit %d, want 0 (warnings only)", code)
	}
}

func TestDoctorPersistenceAndVersion(t *testing.T) {
	t.Parallel()
	addr := docServer(t, nil, "")
	_, out, _ := doctorRun(t, "--redis", addr)
	wantLine(t, out, "warn", "persistence", "a restart resets every limit; set appendonly yes")
	wantLine(t, out, "ok", "version", `Redis 7\.`)
	addr = docServer(t, nil, "", "--save", "3600 1")
	_, out, _ = doctorRun(t, "--redis", addr)
	wantLine(t, out, "ok", "persistence", "RDB snapshots")

	// Older versions cannot be set up here (the machine has one Redis):
	// the judgement itself.
	for v, want := range map[string]int{"6.0.16": levelFail, "5.0.7": levelFail, "6.2.14": levelWarn, "7.0.15": levelOK, "7.4.1": levelOK, "10.0.0": levelOK} {
		if got, msg := versionFinding(map[string]string{"redis_version": v}); got != want || !strings.HasPrefix(msg, "Redis "+v) {
			t.Errorf("versionFinding(%s) = %d (%s), want %d", v, got, msg, want)
		}
	}
}

// Valkey reports, for compatibility, the Redis version it speaks
// (redis_version:7.2.4), and the doctor said "Redis 7.2.4" of Valkey
// 8.0.1. It names Valkey and its own version (server_name, valkey_version;
// HELLO's server and version for a user INFO is refused to), and judges
// what runs by the Redis version it speaks. So does the demo.
func TestDoctorValkey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := valkeyServer(t)
	c := docClient(t, addr)
	info, err := c.InfoMap(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	version := info["Server"]["valkey_version"]
	if info["Server"]["server_name"] != "valkey" || version == "" {
		t.Fatalf("valkey-server's INFO: %v", info["Server"])
	}
	compat := info["Server"]["redis_version"]
	_, out, _ := doctorRun(t, "--redis", addr)
	if header := "redisrate doctor: " + addr + " (standalone, Valkey " + version + ")\n"; !strings.HasPrefix(out, header) {
		t.Errorf("the doctor's first line is not %q:\n%s", header, out)
	}
	wantLine(t, out, "ok", "version", "Valkey "+regexp.QuoteMeta(version)+": the scripts, EVALSHA_RO and the Functions library all run$")
	if strings.Contains(out, "Redis "+compat) {
		t.Errorf("the doctor calls Valkey %s Redis %s:\n%s", version, compat, out)
	}

	// A limiter's own user, INFO refused: HELLO names the server.
	if err := c.Do(ctx, append([]any{"ACL", "SETUSER", "limiter", "reset"}, fieldsAny(limiterACL+" +hello")...)...).Err(); err != nil {
		t.Fatal(err)
	}
	user := redis.NewClient(&redis.Options{Addr: addr, Username: "limiter", Password: "secret"})
	defer user.Close()
	reply, err := user.Do(ctx, "HELLO").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := helloInfo(reply); got["server_name"] != "valkey" || got["valkey_version"] != version || !versionAtLeast(got["redis_version"], 7, 2) {
		t.Errorf("HELLO of Valkey read as %v", got)
	}
	code, out, _ := doctorRun(t, "--redis", "redis://limiter:secret@"+addr)
	wantLine(t, out, "ok", "acl", "user limiter may run all 7 commands a limiter sends on redisrate:\\*")
	if code != 0 {
		t.Errorf("limiter user on Valkey: exit %d, want 0", code)
	}

	// The demo against it names it too.
	code, out, stderr := runCmd(t, "demo", "--redis", addr, "--limit", "10/100ms", "--algorithm", "gcra")
	if want := "on Valkey " + version + " at " + addr; code != 0 || !strings.Contains(out, want) {
		t.Errorf("demo on Valkey: exit %d, %q; want the output to say %q:\n%s", code, stderr, want, out)
	}
}

// fieldsAny splits an ACL rule line into command arguments.
func fieldsAny(rules string) []any {
	var out []any
	for _, f := range strings.Fields(rules) {
		out = append(out, f)
	}
	return out
}

func TestDoctorReplicas(t *testing.T) {
	t.Parallel()
	primary := docServer(t, nil, "", "--repl-diskless-sync-delay", "0")
	replica := docServer(t, nil, "", "--replicaof", "127.0.0.1", strings.Split(primary, ":")[1])
	waitOnline(t, primary)
	_, out, _ := doctorRun(t, "--redis", primary)
	// INFO's lag is whole seconds since the replica's last ack (sent each
	// second): 0 or 1 on a healthy, busy machine.
	wantLine(t, out, "ok", "replication", "replica "+regexp.QuoteMeta(replica)+" online, lag [01] s")
	wantLine(t, out, "ok", "clock", "agree within")
	// Pointed at the replica, the doctor says a limiter cannot write there.
	code, out, _ := doctorRun(t, "--redis", replica)
	wantLine(t, out, "FAIL", "role", "is a replica .*point it there")
	if code != exitProblem {
		t.Errorf("doctor on a replica: exit %d, want %d", code, exitProblem)
	}
	// Alone, the primary has no replica to fail over to.
	_, out, _ = doctorRun(t, "--redis", docServer(t, nil, ""))
	wantLine(t, out, "warn", "replication", "no replica")
}

func waitOnline(t *testing.T, primary string) {
	t.Helper()
	c := docClient(t, primary)
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, _ := c.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "state=online") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica not online after 15s: %s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A replica whose clock is 2 s behind its primary's: the doctor measures
// TIME on both and fails the deployment.
func TestDoctorClockDifference(t *testing.T) {
	t.Parallel()
	primary := docServer(t, nil, "", "--repl-diskless-sync-delay", "0")
	env := clockShiftEnv(t, -2*time.Second)
	docServer(t, env, "", "--replicaof", "127.0.0.1", strings.Split(primary, ":")[1])
	waitOnline(t, primary)
	code, out, _ := doctorRun(t, "--redis", primary)
	wantLine(t, out, "FAIL", "clock", `differ by up to (1\.[6-9]\d*|2(\.[0-4]\d*)?)s: .*synchronise the clocks`)
	if code != exitProblem {
		t.Errorf("exit %d, want %d", code, exitProblem)
	}
	for spread, want := range map[time.Duration]int{0: levelOK, 50 * time.Millisecond: levelOK, 300 * time.Millisecond: levelWarn, 2 * time.Second: levelFail} {
		if got, _ := clockFinding(spread, 2); got != want {
			t.Errorf("clockFinding(%v) = %d, want %d", spread, got, want)
		}
	}
}

// clockShiftEnv shifts a redis-server's wall clock by d with a small
// preload shim (Debian's libfaketime hangs redis-server, whose jemalloc
// reads the clock while libfaketime initialises).
func clockShiftEnv(t *testing.T, d time.Duration) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short (make unit): no real server; make test runs it")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		redisserver.Missing(t, "shifting a server's clock needs a C compiler (apt-get install gcc)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "shift.c")
	lib := filepath.Join(dir, "shift.so")
	code := `#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <unistd.h>
static long long sh(void) { const char *s = getenv("CLOCKSHIFT_MS"); return s ? atoll(s) * 1000000LL : 0; }
static void add(struct timespec *ts) { long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + sh(); ts->tv_sec = ns / 1000000000LL; ts->tv_nsec = ns % 1000000000LL; }
int clock_gettime(clockid_t id, struct timespec *ts) { int r = syscall(SYS_clock_gettime, id, ts); if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) add(ts); return r; }
int gettimeofday(struct timeval *tv, void *tz) { struct timespec ts; (void)tz; int r = syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts); if (r) return r; add(&ts); if (tv) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; } return 0; }
time_t time(time_t *t) { struct timeval tv; gettimeofday(&tv, 0); if (t) *t = tv.tv_sec; return tv.tv_sec; }
`
	if err := os.WriteFile(src, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("compiling the clock shim: %v\n%s", err, out)
	}
	return []string{"LD_PRELOAD=" + lib, "CLOCKSHIFT_MS=" + strconv.FormatInt(d.Milliseconds(), 10)}
}

func TestDoctorScriptsAndFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := docServer(t, nil, "")
	_, out, _ := doctorRun(t, "--redis", addr)
	wantLine(t, out, "ok", "scripts", "0 of 7 cached; not cached: gcra, .*reset: the client sends them with EVAL")
	wantLine(t, out, "ok", "functions", "library redisrate not loaded")

	c := docClient(t, addr)
	for _, s := range scripts.Specs() {
		if err := c.ScriptLoad(ctx, s.Source).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ScriptLoad(ctx, scripts.ResetSource).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.FunctionLoadReplace(ctx, scripts.Library).Err(); err != nil {
		t.Fatal(err)
	}
	_, out, _ = doctorRun(t, "--redis", addr)
	wantLine(t, out, "ok", "scripts", "all 6 bundled scripts and reset are cached")
	wantLine(t, out, "ok", "functions", "version matches this build")

	// Another version of the library under the same name.
	other := "#!lua name=redisrate\nredis.register_function{function_name='redisrate_version', callback=function() return 'old' end, flags={'no-writes'}}\n"
	if err := c.FunctionLoadReplace(ctx, other).Err(); err != nil {
		t.Fatal(err)
	}
	_, out, _ = doctorRun(t, "--redis", addr)
	wantLine(t, out, "warn", "functions", "version old loaded, this build's is "+scripts.LibraryVersion+": the client falls back to EVALSHA")
}

// limiterACL is the least-privilege line the docs recommend.
const limiterACL = "on >secret resetkeys ~redisrate:* resetchannels -@all +ping +evalsha +eval +evalsha_ro +eval_ro +fcall +fcall_ro +script|load " +
	"+time +get +exists +type +del +psetex +pexpire +zadd +zcount +zscore +zrangebyscore +zrevrangebyscore +zremrangebyscore"

// TestHelloVersion: the doctor reads the version from HELLO (for a user
// INFO is refused to) whichever protocol the client speaks: go-redis's
// default RESP3 gives a map, RESP2 a list.
func TestHelloVersion(t *testing.T) {
	addr := startRedis(t, false)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	info, err := admin.InfoMap(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := info["Server"]["redis_version"]
	for _, protocol := range []int{3, 2} {
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol})
		reply, err := c.Do(ctx, "HELLO").Result()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := helloVersion(reply); !ok || got != want || want == "" {
			t.Errorf("RESP%d: HELLO gives version %q (%v), want %q", protocol, got, ok, want)
		}
	}
}

func TestDoctorACL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := docServer(t, nil, "")
	c := docClient(t, addr)
	setUser := func(name, rules string) {
		t.Helper()
		args := []any{"ACL", "SETUSER", name, "reset"}
		for _, r := range strings.Fields(rules) {
			args = append(args, r)
		}
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	setUser("limiter", limiterACL)
	// As the limiter itself: INFO is refused, the calls that write nothing
	// all pass.
	code, out, _ := doctorRun(t, "--redis", "redis://limiter:secret@"+addr)
	wantLine(t, out, "warn", "info", "INFO is refused")
	wantLine(t, out, "ok", "acl", "user limiter may run all 7 commands a limiter sends on redisrate:\\*, and the commands the scripts call \\(by calls that write nothing\\)")
	if code != 0 {
		t.Errorf("limiter user with the recommended line: exit %d, want 0", code)
	}
	if n, _ := c.DBSize(ctx).Result(); n != 0 {
		t.Errorf("the doctor's probe wrote %d keys", n)
	}
	// The line is enough for redisrate try, as that user, too.
	if code, stdout, stderr := runCmd(t, "try", "--redis", "redis://limiter:secret@"+addr, "--limit", "3/s", "redisrate:acl"); code != 0 {
		t.Errorf("try as the limiter user: exit %d, %s%s; want 0", code, stdout, stderr)
	}
	if err := c.Del(ctx, "redisrate:acl").Err(); err != nil {
		t.Fatal(err)
	}
	// Without FCALL: the doctor names the command and the rule to add.
	setUser("limiter", strings.Replace(limiterACL, " +fcall ", " ", 1))
	code, out, _ = doctorRun(t, "--redis", "redis://limiter:secret@"+addr)
	wantLine(t, out, "FAIL", "acl", "FCALL is refused: .*'fcall'.*ACL SETUSER limiter \\+fcall$")
	if code != exitProblem {
		t.Errorf("limiter user without +fcall: exit %d, want %d", code, exitProblem)
	}
	// An admin checks another user with ACL DRYRUN: a wrong key pattern.
	setUser("limiter2", strings.Replace(limiterACL, "~redisrate:*", "~limits:*", 1))
	code, out, _ = doctorRun(t, "--redis", addr, "--acl-user", "limiter2")
	wantLine(t, out, "FAIL", "acl", "EVALSHA is refused on redisrate:\\*: .*access the .redisrate:redisrate-doctor. key.*ACL SETUSER limiter2 ~redisrate:\\*")
	if code != exitProblem {
		t.Errorf("limiter2 on another prefix: exit %d, want %d", code, exitProblem)
	}
	code, out, _ = doctorRun(t, "--redis", addr, "--acl-user", "limiter2", "--key-prefix", "limits:")
	wantLine(t, out, "ok", "acl", "user limiter2 may run all 7 commands a limiter sends on limits:\\*, and the commands the scripts call \\(by ACL DRYRUN\\)")
	if code != 0 {
		t.Errorf("limiter2 on its own prefix: exit %d, want 0", code)
	}
	// Without a command the scripts call: ACL DRYRUN of EVALSHA passes, the
	// doctor checks the script's calls one by one.
	setUser("limiter3", strings.Replace(limiterACL, " +psetex ", " ", 1))
	code, out, _ = doctorRun(t, "--redis", addr, "--acl-user", "limiter3")
	wantLine(t, out, "FAIL", "acl", "user limiter3 may not run psetex on redisrate:\\*, which the scripts call .*ACL SETUSER limiter3 \\+psetex$")
	if code != exitProblem {
		t.Errorf("limiter3 without +psetex: exit %d, want %d", code, exitProblem)
	}
	// As the user itself, a missing TIME shows in the script's reply.
	setUser("limiter", strings.Replace(limiterACL, " +time ", " ", 1))
	code, out, _ = doctorRun(t, "--redis", "redis://limiter:secret@"+addr)
	wantLine(t, out, "FAIL", "acl", "EVAL fails inside the script: .*can.t run this command.*ACL SETUSER limiter \\+time \\+get")
	if code != exitProblem {
		t.Errorf("limiter without +time: exit %d, want %d", code, exitProblem)
	}
	// The default user may do anything: more than a limiter needs.
	_, out, _ = doctorRun(t, "--redis", addr)
	wantLine(t, out, "warn", "acl", "user default may also run FLUSHALL, CONFIG, GET: more than a limiter needs")
}

func TestDoctorCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var addrs []string
	var clients []*redis.Client
	for range 3 {
		a := docServer(t, nil, "", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000")
		addrs = append(addrs, a)
		clients = append(clients, docClient(t, a))
	}
	// Slots 0-10922 only: a third of the slots is not served.
	for i, c := range clients[:2] {
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", i*5461, i*5461+5460).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range clients[1:] {
		if err := c.ClusterMeet(ctx, "127.0.0.1", strings.Split(addrs[0], ":")[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitNodes := func() {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			n := 0
			for _, c := range clients {
				nodes, _ := c.ClusterNodes(ctx).Result()
				if strings.Count(strings.TrimSpace(nodes), "\n") == 2 && !strings.Contains(nodes, "handshake") {
					n++
				}
			}
			if n == 3 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("cluster nodes do not know each other after 15s")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitNodes()
	code, out, _ := doctorRun(t, "--redis", addrs[0])
	wantLine(t, out, "FAIL", "cluster", `cluster_state fail, \d+ of 16384 slots assigned`)
	if code != exitProblem {
		t.Errorf("partial coverage: exit %d, want %d", code, exitProblem)
	}
	if !strings.Contains(out, "Cluster of 3 nodes") {
		t.Errorf("the header does not say Cluster of 3 nodes:\n%s", out)
	}

	// Every slot served, and one being migrated.
	if err := clients[2].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 10922, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok := 0
		var info string
		for _, c := range clients {
			info, _ = c.ClusterInfo(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_ok:16384") {
				ok++
			}
		}
		if ok == len(clients) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok: %s", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	id2, _ := clients[2].ClusterMyID(ctx).Result()
	if err := clients[0].Do(ctx, "CLUSTER", "SETSLOT", 100, "MIGRATING", id2).Err(); err != nil {
		t.Fatal(err)
	}
	_, out, _ = doctorRun(t, "--redis", addrs[1])
	wantLine(t, out, "ok", "cluster", "cluster_state ok, all 16384 slots served by 3 primaries")
	wantLine(t, out, "warn", "cluster", `slots being migrated: .*\[100->-`)
	wantLine(t, out, "ok", "version", strings.Join(sortedCopy(addrs), ", ")+": Redis 7")
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// TLS: rediss:// with --tls-ca; without the CA the handshake fails and the
// doctor says Redis cannot be reached.
func TestDoctorTLS(t *testing.T) {
	t.Parallel()
	dir := docCerts(t)
	addr := docServer(t, nil, dir)
	code, out, _ := doctorRun(t, "--redis", "rediss://"+addr, "--tls-ca", filepath.Join(dir, "ca.crt"))
	wantLine(t, out, "ok", "version", `Redis 7\.`)
	if code != 0 {
		t.Errorf("TLS with the CA: exit %d, want 0", code)
	}
	code, _, _ = doctorRun(t, "--redis", addr, "--tls-ca", filepath.Join(dir, "ca.crt"))
	if code != 0 {
		t.Errorf("host:port with --tls-ca: exit %d, want 0", code)
	}
	code, _, stderr := doctorRun(t, "--redis", "rediss://"+addr)
	if code != exitUnreachable || !strings.Contains(stderr, "certificate") {
		t.Errorf("TLS without the CA: exit %d, %q; want %d and a certificate error", code, stderr, exitUnreachable)
	}
	code, _, _ = doctorRun(t, "--redis", addr)
	if code != exitUnreachable {
		t.Errorf("plain text to a TLS port: exit %d, want %d", code, exitUnreachable)
	}
	code, _, stderr = doctorRun(t, "--redis", addr, "--tls-ca", filepath.Join(dir, "nope.crt"))
	if code != exitUsage || !strings.Contains(stderr, "--tls-ca") {
		t.Errorf("missing CA file: exit %d, %q", code, stderr)
	}
}

// docCerts writes ca.crt, redis.crt and redis.key (for 127.0.0.1) into a
// temporary directory.
func docCerts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "doctor test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	write("ca.crt", "CERTIFICATE", caDER)
	write("redis.crt", "CERTIFICATE", der)
	write("redis.key", "PRIVATE KEY", keyDER)
	return dir
}

// The other commands that reach Redis take --tls-ca as the doctor does.
func TestCommandsOverTLS(t *testing.T) {
	t.Parallel()
	dir := docCerts(t)
	addr := docServer(t, nil, dir)
	ca := filepath.Join(dir, "ca.crt")
	for _, args := range [][]string{
		{"try", "--redis", "rediss://" + addr, "--tls-ca", ca, "--limit", "3/s", "tls:user"},
		{"load", "--redis", addr, "--tls-ca", ca},
		{"functions", "--load", "--redis", addr, "--tls-ca", ca},
		{"demo", "--redis", addr, "--tls-ca", ca, "--limit", "10/100ms", "--algorithm", "gcra"},
	} {
		code, out, stderr := runCmd(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d, %q %q", args, code, out, stderr)
		}
	}
	if code, _, stderr := runCmd(t, "try", "--redis", "rediss://"+addr, "--limit", "3/s", "tls:user"); code != exitUnreachable || !strings.Contains(stderr, "certificate") {
		t.Errorf("try without the CA: exit %d, %q; want %d and a certificate error", code, stderr, exitUnreachable)
	}
	// --tls-ca where nothing would use it is a usage error, not ignored.
	for _, args := range [][]string{{"demo", "--tls-ca", ca}, {"functions", "--tls-ca", ca}} {
		if code, _, stderr := runCmd(t, args...); code != exitUsage || !strings.Contains(stderr, "--tls-ca") {
			t.Errorf("%v: exit %d, %q; want a usage error naming --tls-ca", args, code, stderr)
		}
	}
}

// The doctor's maxmemory, persistence and functions lines that the README
// and docs/reliability.md show are what the doctor prints for the
// deployment they describe (an evicting policy, AOF, a replica, the library
// loaded). reliability.md's other lines (version, replication lag, clock
// offsets, the script cache, an ACL user) depend on the machine and the
// moment; each is tested on its own in the TestDoctor* tests above.
func TestDoctorOutputInDocs(t *testing.T) {
	t.Parallel()
	addr := docServer(t, nil, "", "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru", "--appendonly", "yes", "--repl-diskless-sync-delay", "0")
	docServer(t, nil, "", "--replicaof", "127.0.0.1", strings.Split(addr, ":")[1])
	waitOnline(t, addr)
	if code, out, stderr := runCmd(t, "functions", "--load", "--redis", addr); code != 0 {
		t.Fatalf("functions --load: %d %s %s", code, out, stderr)
	}
	_, out, _ := doctorRun(t, "--redis", addr)
	const docAddr = "127.0.0.1:16700"
	for _, doc := range []string{"../../README.md", "../../docs/reliability.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			for _, check := range []string{"maxmemory", "persistence", "functions"} {
				if regexp.MustCompile(`^(ok|FAIL|warn)\s+` + check + `\s`).MatchString(line) {
					n++
					if want := strings.ReplaceAll(line, docAddr, addr); !strings.Contains(out, want+"\n") {
						t.Errorf("%s shows %q; the doctor prints:\n%s", doc, line, out)
					}
				}
			}
		}
		// reliability.md shows all three; the README, within its 12 KB,
		// at least one.
		if want := map[bool]int{true: 1, false: 3}[strings.HasSuffix(doc, "README.md")]; n < want {
			t.Errorf("%s: %d of the maxmemory, persistence and functions lines found, want %d or more", doc, n, want)
		}
	}
}
