// Command redisrate shows, exports and loads the redisrate Lua scripts.
//
//	redisrate demo                      all six algorithms on one traffic pattern (embedded Redis)
//	redisrate scripts [--dir DIR]       list the scripts with their SHA1s, or write the .lua files
//	redisrate load --redis ADDR         SCRIPT LOAD every script on every primary
//	redisrate try --redis ADDR KEY      one decision
//	redisrate functions [--load ...]    the Redis Functions library (Redis 7)
//
// Run "redisrate COMMAND --help" for the flags of each command.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate"
)

// Exit codes, distinct so that scripts and deploy pipelines can tell them
// apart. They are listed in every command's --help.
const (
	exitOK          = 0
	exitDenied      = 1   // try: the request was not admitted
	exitUsage       = 2   // bad flags or arguments: a bad limit, an unknown algorithm
	exitUnreachable = 3   // Redis could not be reached
	exitRedis       = 4   // Redis answered with an error
	exitLocal       = 5   // a local failure: writing files, the embedded Redis
	exitInterrupted = 130 // interrupted (Ctrl-C), as shells report SIGINT
)

const exitCodesHelp = `Exit codes:
  0  success (try: the request was admitted)
  1  try: the request was denied
  2  usage: a bad flag or argument, a bad limit such as 10/fortnight, an unknown algorithm
  3  Redis could not be reached
  4  Redis answered with an error (a key holding other data, a command it lacks, ...)
  5  a local failure: writing files, starting the embedded Redis
  6  doctor: a check failed
  130  interrupted (Ctrl-C)
`

// mainUsage is the help of the whole command, made from each command's
// usage line and summary, so that registering a command (in commands) is
// all it takes to list it.
func mainUsage() string {
	var b strings.Builder
	b.WriteString("redisrate shows, exports and loads the redisrate rate-limiting scripts.\n\nUsage:\n")
	for _, c := range commands {
		line, _, _ := strings.Cut(c.usage, "\n")
		fmt.Fprintf(&b, "  %s\n", strings.TrimPrefix(line, "Usage: "))
	}
	b.WriteString("\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summaryLine())
	}
	b.WriteString("\nRun \"redisrate COMMAND --help\" for a command's flags.\n\n")
	b.WriteString(exitCodesHelp)
	return b.String()
}

// quietLogger drops go-redis's own log lines ("failed to dial after 5
// attempts"): the command reports every error itself, once.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietLogger{}) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand: its flags are declared by setup, which returns
// the function that runs it with the positional arguments.
type command struct {
	name    string
	summary string // one line, for "redisrate --help"
	usage   string // first lines of --help, before the flags; the first is "Usage: redisrate NAME ..."
	setup   func(fs *flag.FlagSet) func(ctx context.Context, args []string, stdout io.Writer) error
}

// summaryLine is c.summary, or else the first line of the description in
// its usage (the paragraph after the usage line).
func (c command) summaryLine() string {
	if c.summary != "" {
		return c.summary
	}
	_, desc, _ := strings.Cut(c.usage, "\n\n")
	line, _, _ := strings.Cut(strings.TrimSpace(desc), "\n")
	return line
}

var commands = []command{demoCommand, scriptsCommand, loadCommand, tryCommand, functionsCommand, doctorCommand}

// run is the whole program, testable in-process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage())
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			return run(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, mainUsage())
		return exitOK
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	fmt.Fprintf(stderr, "redisrate: unknown command %q: must be one of %s\nRun \"redisrate --help\" for usage.\n", name, strings.Join(names, ", "))
	return exitUsage
}

func (c command) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redisrate "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	do := c.setup(fs)
	fs.Usage = func() {}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		c.printHelp(fs, stdout)
		return exitOK
	}
	if err == nil {
		err = do(ctx, pos, stdout)
	}
	if err == nil {
		return exitOK
	}
	var ex *exitError
	if errors.Is(err, context.Canceled) || !errors.As(err, &ex) {
		ex = classify(err)
	}
	if ex.code == exitDenied {
		return ex.code
	}
	fmt.Fprintf(stderr, "redisrate %s: %s\n", c.name, strings.TrimPrefix(ex.Error(), "redisrate: "))
	if ex.code == exitUsage {
		fmt.Fprintf(stderr, "Run \"redisrate %s --help\" for usage.\n", c.name)
	}
	return ex.code
}

func (c command) printHelp(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, c.usage)
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprintln(w)
	fmt.Fprint(w, exitCodesHelp)
}

// parseInterleaved lets flags follow positional arguments ("try KEY --json"),
// which the flag package alone stops at.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageErr("%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// exitError carries the exit code an error maps to.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func localErr(err error) error { return &exitError{code: exitLocal, err: err} }

// classify maps an error that carries no exit code: an argument error is a
// usage error, an error reply is Redis refusing, anything from the network
// means Redis could not be reached.
func classify(err error) *exitError {
	var rerr redis.Error
	var nerr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return &exitError{code: exitInterrupted, err: errors.New("interrupted")}
	case errors.Is(err, redisrate.ErrInvalid):
		return &exitError{code: exitUsage, err: err}
	case errors.As(err, &rerr) && !errors.As(err, &nerr):
		return &exitError{code: exitRedis, err: err}
	default:
		return &exitError{code: exitUnreachable, err: err}
	}
}

// limitFlags are the flags that make a limit, shared by demo and try.
type limitFlags struct {
	limit     string
	burst     wholeFlag
	algorithm string
}

func (f *limitFlags) register(fs *flag.FlagSet, algoHelp string) {
	f.burst = wholeFlag{name: "burst", max: maxWhole}
	fs.StringVar(&f.limit, "limit", "10/s", `the limit, RATE/PERIOD: "10/s", "100/minute", "5/250ms", "100000/day", "1000000000/30d"; a rate that is not whole per period takes a longer period ("2.5/s" is 5/2s); a calendar day, week or month in a time zone: "100000/day calendar America/Los_Angeles"`)
	fs.Var(&f.burst, "burst", "the capacity, the most units at once: a whole number (`N`); 0 means the rate. Window algorithms take only the rate")
	fs.StringVar(&f.algorithm, "algorithm", "", algoHelp)
}

// parse returns the limit the flags describe. The algorithm comes from
// --algorithm, else from the limit text ("10/s token_bucket"), else GCRA.
func (f *limitFlags) parse() (redisrate.Limit, error) {
	lim, err := redisrate.ParseLimit(f.limit)
	if err != nil {
		return lim, usageErr("--limit: %s", trimPrefix(err))
	}
	if f.burst.v != 0 {
		lim.Burst = f.burst.v
	}
	if f.algorithm != "" {
		if lim.Algorithm, err = redisrate.ParseAlgorithm(f.algorithm); err != nil {
			return lim, usageErr("--algorithm: %s", trimPrefix(err))
		}
	}
	return lim, nil
}

// maxWhole is the largest number the scripts take for limit, burst and cost
// (contract v2: 10^15).
const maxWhole = 1_000_000_000_000_000

// cliDecisionTimeout is the Limiters' decision timeout in the commands (see
// redisrate.WithDecisionTimeout): a person waits longer than a service.
const cliDecisionTimeout = 5 * time.Second

// wholeFlag is a flag that takes a whole number as the scripts do (digits
// only, up to max), refused in the scripts' words: "invalid cost '1.5':
// must be a whole number from 0 to 10^15".
type wholeFlag struct {
	name string
	max  int64
	v    int64
}

func (w *wholeFlag) String() string {
	if w == nil {
		return "0"
	}
	return strconv.FormatInt(w.v, 10)
}

func (w *wholeFlag) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strings.TrimLeft(s, "0123456789") != "" || v > w.max {
		return fmt.Errorf("invalid %s '%s': must be a whole number from 0 to 10^15", w.name, s)
	}
	w.v = v
	return nil
}

func trimPrefix(err error) string { return strings.TrimPrefix(err.Error(), "redisrate: ") }

const redisFlagHelp = "the Redis server: `ADDR` as host:port or a redis:// or rediss:// URL; a Cluster is detected"

const tlsCAFlagHelp = "a PEM `FILE` of the CA that signed the server's certificate (turns TLS on for a host:port ADDR)"

// redisOptions are the client options for ADDR (host:port, or a redis:// or
// rediss:// URL), with the CA of --tls-ca when given. Timeouts are short: a
// command-line tool should fail fast.
func redisOptions(addr, caFile string) (*redis.Options, error) {
	if addr == "" {
		return nil, usageErr("--redis ADDR is required")
	}
	opt := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		var err error
		if opt, err = redis.ParseURL(addr); err != nil {
			return nil, usageErr("--redis %q: %v", addr, err)
		}
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, usageErr("--tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageErr("--tls-ca %s: no PEM certificate in it", caFile)
		}
		if opt.TLSConfig == nil {
			host, _, _ := net.SplitHostPort(opt.Addr)
			opt.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
		opt.TLSConfig.RootCAs = pool
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = 3*time.Second, 5*time.Second, 5*time.Second
	opt.MaxRetries, opt.DialerRetries = -1, 1
	return opt, nil
}

// connect returns a client for addr after checking that the server answers:
// a *redis.ClusterClient when the server is a Cluster node, else a
// *redis.Client. Timeouts are short: a command-line tool should fail fast.
func connect(ctx context.Context, addr, caFile string) (redis.UniversalClient, error) {
	opt, err := redisOptions(addr, caFile)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opt)
	info, err := rdb.Info(ctx, "cluster").Result()
	var rerr redis.Error
	if err != nil && errors.As(err, &rerr) && !isNetErr(err) {
		// Some proxies and managed services refuse INFO: they are no Cluster
		// node we could address, so use the server as it is if it answers.
		info, err = "", rdb.Ping(ctx).Err()
	}
	if err != nil {
		_ = rdb.Close()
		if errors.As(err, &rerr) && !isNetErr(err) {
			return nil, &exitError{code: exitRedis, err: fmt.Errorf("the server at %s refused PING: %w", opt.Addr, err)}
		}
		return nil, &exitError{code: exitUnreachable, err: fmt.Errorf("cannot reach Redis at %s: %w", opt.Addr, err)}
	}
	if !strings.Contains(info, "cluster_enabled:1") {
		return rdb, nil
	}
	_ = rdb.Close()
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{opt.Addr}, Username: opt.Username, Password: opt.Password, TLSConfig: opt.TLSConfig,
		DialTimeout: opt.DialTimeout, ReadTimeout: opt.ReadTimeout, WriteTimeout: opt.WriteTimeout, MaxRetries: -1, DialerRetries: 1,
	})
	if err := cc.Ping(ctx).Err(); err != nil {
		_ = cc.Close()
		return nil, &exitError{code: exitUnreachable, err: fmt.Errorf("cannot reach the Redis Cluster at %s: %w", opt.Addr, err)}
	}
	return cc, nil
}

func isNetErr(err error) bool {
	var nerr net.Error
	return errors.As(err, &nerr)
}

// forEachPrimary runs fn on every primary: each master of a Cluster, or the
// one server. It returns the addresses it ran on, in a stable order.
func forEachPrimary(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, c *redis.Client) error) ([]string, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		c := rdb.(*redis.Client)
		return []string{c.Options().Addr}, fn(ctx, c)
	}
	cc.ReloadState(ctx)
	var mu sync.Mutex
	var addrs []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if err := fn(ctx, c); err != nil {
			return fmt.Errorf("on %s: %w", c.Options().Addr, err)
		}
		mu.Lock()
		addrs = append(addrs, c.Options().Addr)
		mu.Unlock()
		return nil
	})
	slices.Sort(addrs)
	return addrs, err
}
