package redisrate

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Each function body is the script, byte for byte: the library is no second
// copy of the algorithms.
func TestFunctionsLibraryBodiesAreTheScripts(t *testing.T) {
	lib := FunctionsLibrary()
	if !strings.HasPrefix(lib, "#!lua name=redisrate\n") {
		t.Fatalf("library starts %.40q", lib)
	}
	for _, s := range Scripts() {
		open := "local function " + s.Algorithm.FunctionName() + "(KEYS, ARGV)\n"
		i := strings.Index(lib, open)
		if i < 0 {
			t.Fatalf("no function for %s", s.Name)
		}
		body := lib[i+len(open):]
		j := strings.Index(body, "\nend -- "+s.Name+"\n")
		if j < 0 {
			t.Fatalf("%s: function not closed", s.Name)
		}
		if body[:j+1] != s.Source {
			t.Errorf("%s: the function body differs from the script", s.Name)
		}
		for _, fn := range []string{s.Algorithm.FunctionName(), s.Algorithm.FunctionName() + "_ro"} {
			if !strings.Contains(lib, "function_name = '"+fn+"'") {
				t.Errorf("%s is not registered", fn)
			}
		}
	}
	if n := strings.Count(lib, "redis.register_function"); n != 2*len(Scripts()) {
		t.Errorf("%d functions registered, want %d", n, 2*len(Scripts()))
	}
}

// startRedisForFunctions starts redis-server from PATH on a free 127.0.0.1 port for
// the test and stops it when the test ends.
func startRedisForFunctions(t *testing.T) *redis.Client {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH: install it (Debian: apt-get install redis-server) to run the real-Redis tests")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	for deadline := time.Now().Add(10 * time.Second); rdb.Ping(context.Background()).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer within 10s")
		}
	}
	return rdb
}

// functionsReply renders a script or function reply, or its error, for comparison.
func functionsReply(v any, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprint(v)
}

// functionsSameReply compares two replies, allowing the two duration fields (3 and 4)
// to differ by the few milliseconds between the two calls.
func functionsSameReply(a, b string) bool {
	if a == b {
		return true
	}
	fa, fb := strings.Fields(strings.Trim(a, "[]")), strings.Fields(strings.Trim(b, "[]"))
	if len(fa) != 6 || len(fb) != 6 || strings.HasPrefix(a, "error") {
		return false
	}
	for i := range fa {
		if fa[i] == fb[i] {
			continue
		}
		x, _ := strconv.Atoi(fa[i])
		y, _ := strconv.Atoi(fb[i])
		if (i != 2 && i != 3) || x-y > 50 || y-x > 50 || (x < 0) != (y < 0) {
			return false
		}
	}
	return true
}

// The library loaded into a real Redis gives the same replies through FCALL
// as the scripts through EVALSHA, for every algorithm, call after call on
// keys with the same history; FCALL_RO of the _ro variants decides as check.
func TestFunctionsLibraryMatchesEvalsha(t *testing.T) {
	rdb := startRedisForFunctions(t)
	ctx := context.Background()
	if err := rdb.FunctionLoadReplace(ctx, FunctionsLibrary()).Err(); err != nil {
		if strings.Contains(err.Error(), "unknown command") {
			t.Skipf("this redis-server has no Redis Functions (needs 7.0): %v", err)
		}
		t.Fatalf("FUNCTION LOAD REPLACE: %v", err)
	}
	// Periods of an hour: the few microseconds between the EVALSHA and the
	// FCALL of a pair change no count, at most a duration by a millisecond.
	calls := [][]any{
		{"5", "3600000"},
		{"5", "3600000", "", "2"},
		{"5", "3600000", "", "1", "check"},
		{"5", "3600000", "", "0"},
		{"5", "3600000", "", "3"},
		{"5", "3600000", "", "9"},
		{"5", "3600000", "", "1", "", "100", "86400000", ""},
		{"5", "3600000", "", "1", "", "100"},
		{"5", "0"},
		{"5", "3600000", "", "1", "sometimes"},
	}
	for _, s := range Scripts() {
		fn := s.Algorithm.FunctionName()
		if err := rdb.ScriptLoad(ctx, s.Source).Err(); err != nil {
			t.Fatal(err)
		}
		for i, args := range calls {
			ek, fk := "e:"+s.Name, "f:"+s.Name
			e := functionsReply(rdb.EvalSha(ctx, s.SHA1, []string{ek}, args...).Result())
			f := functionsReply(rdb.FCall(ctx, fn, []string{fk}, args...).Result())
			if !functionsSameReply(e, f) {
				t.Errorf("%s call %d %q: EVALSHA %s, FCALL %s", s.Name, i+1, args, e, f)
			}
			// The read-only variant, with mode left out, decides as a check
			// would, and writes nothing.
			if len(args) > 4 && args[4] != "" {
				continue
			}
			checkArgs := append([]any{}, args...)
			for len(checkArgs) < 5 {
				checkArgs = append(checkArgs, "")
			}
			checkArgs[4] = "check"
			before := rdb.Dump(ctx, fk).Val()
			ro := functionsReply(rdb.FCallRO(ctx, fn+"_ro", []string{fk}, args...).Result())
			ec := functionsReply(rdb.EvalSha(ctx, s.SHA1, []string{ek}, checkArgs...).Result())
			if !functionsSameReply(ec, ro) {
				t.Errorf("%s call %d %q: EVALSHA check %s, FCALL_RO %s_ro %s", s.Name, i+1, args, ec, fn, ro)
			}
			if after := rdb.Dump(ctx, fk).Val(); after != before {
				t.Errorf("%s_ro changed the key", fn)
			}
		}
		// The same refusal of a user's key, which stays as it was.
		rdb.Set(ctx, "order:"+s.Name, "shipped", 0)
		e := functionsReply(rdb.EvalSha(ctx, s.SHA1, []string{"order:" + s.Name}, "5", "1000").Result())
		f := functionsReply(rdb.FCall(ctx, fn, []string{"order:" + s.Name}, "5", "1000").Result())
		if e != f || !strings.Contains(f, "left untouched") || rdb.Get(ctx, "order:"+s.Name).Val() != "shipped" {
			t.Errorf("%s on a user's key: EVALSHA %s, FCALL %s", s.Name, e, f)
		}
		// The _ro variant refuses a mode other than check as the script does.
		e = functionsReply(rdb.EvalSha(ctx, s.SHA1, []string{"x"}, "5", "1000", "", "1", "record").Result())
		f = functionsReply(rdb.FCallRO(ctx, fn+"_ro", []string{"x"}, "5", "1000", "", "1", "record").Result())
		if e != f || !strings.Contains(f, "ERR invalid mode 'record'") {
			t.Errorf("%s_ro with mode record: EVALSHA %s, FCALL_RO %s", fn, e, f)
		}
		// Only the _ro variant may run under FCALL_RO.
		if err := rdb.FCallRO(ctx, fn, []string{"x"}, "5", "1000").Err(); err == nil {
			t.Errorf("FCALL_RO %s succeeded: it writes, so Redis must refuse it", fn)
		}
	}
}
