package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate/scripts"
)

// exitProblem is doctor's exit code when it found at least one problem.
const exitProblem = 6

var doctorCommand = command{
	name:    "doctor",
	summary: "check that a Redis deployment is fit to hold rate limits, with what to do",
	usage: `Usage: redisrate doctor --redis ADDR [--tls-ca FILE] [--key-prefix rate:] [--acl-user NAME]

Checks whether a Redis deployment is fit to hold rate limits, and prints one
line per finding with what to do: "ok", "warn" (advice) or "FAIL" (a problem).

  version           6.2 runs the scripts; 7.0 adds EVALSHA_RO and Functions
  maxmemory-policy  an evicting policy deletes limiter keys: their limits reset
  persistence       without AOF or RDB, a restart resets every limit
  replication       replicas, their link and lag; a limiter on a replica
  cluster           cluster_state, slot coverage, slots being migrated
  clock             TIME on every node: clocks that disagree stretch waits
  scripts           the bundled scripts' SHA1s in each primary's script cache
  functions         the redisrate library and its version (FCALL_RO redisrate_version 0)
  acl               the user may run every script on KEY-PREFIX* (ACL DRYRUN, or
                    calls that write nothing when the user may not run ACL DRYRUN)

A Cluster is detected, and every node is checked. For TLS, give a rediss://
URL (with user and password if any), and --tls-ca for a private CA.
The exit code is 0 when nothing failed, 6 when a check failed.

Example:
  redisrate doctor --redis rediss://limiter:secret@redis.internal:6380 --tls-ca ca.crt
`,
	setup: func(fs *flag.FlagSet) func(context.Context, []string, io.Writer) error {
		addr := fs.String("redis", "", redisFlagHelp)
		ca := fs.String("tls-ca", "", tlsCAFlagHelp)
		prefix := fs.String("key-prefix", "redisrate:", "the `PREFIX` of the limiter's keys, for the ACL check")
		aclUser := fs.String("acl-user", "", "check the permissions of user `NAME` (with ACL DRYRUN) rather than the connected user's")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if len(args) != 0 {
				return usageErr("doctor takes no arguments, got %q", args)
			}
			opt, err := redisOptions(*addr, *ca)
			if err != nil {
				return err
			}
			d := &doctor{opt: opt, prefix: *prefix, aclUser: *aclUser, w: stdout}
			if err := d.run(ctx); err != nil {
				return err
			}
			if d.fails > 0 {
				return &exitError{code: exitProblem, err: fmt.Errorf("%s found", plural(d.fails, "problem", "problems"))}
			}
			return nil
		}
	},
}

// Finding levels.
const (
	levelOK = iota
	levelWarn
	levelFail
)

var levelNames = [...]string{"ok  ", "warn", "FAIL"}

// node is one server of the deployment.
type node struct {
	addr    string
	primary bool
	c       *redis.Client
	info    map[string]string // INFO (server, replication, persistence, memory, cluster) fields
	err     error             // why it could not be asked
	offset  time.Duration     // TIME minus this machine's clock
	timeErr error
}

type doctor struct {
	opt     *redis.Options
	prefix  string
	aclUser string
	w       io.Writer
	fails   int
	warns   int
	nodes   []*node
	cluster bool
}

func (d *doctor) say(level int, check, format string, args ...any) {
	switch level {
	case levelFail:
		d.fails++
	case levelWarn:
		d.warns++
	}
	fmt.Fprintf(d.w, "%s  %-16s %s\n", levelNames[level], check, fmt.Sprintf(format, args...))
}

func (d *doctor) client(addr string) *redis.Client {
	o := *d.opt
	o.Addr = addr
	if o.TLSConfig != nil {
		o.TLSConfig = o.TLSConfig.Clone()
	}
	return redis.NewClient(&o)
}

// helloVersion is the server version in a HELLO reply: a map under RESP3
// (go-redis's default), a flat list of names and values under RESP2.
func helloVersion(reply any) (string, bool) {
	return helloField(reply, "version")
}

// helloField is one field of a HELLO reply ("server", "version", ...).
func helloField(reply any, name string) (string, bool) {
	switch v := reply.(type) {
	case map[any]any:
		if f, ok := v[name]; ok {
			return fmt.Sprint(f), true
		}
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			if v[i] == name {
				return fmt.Sprint(v[i+1]), true
			}
		}
	}
	return "", false
}

// helloInfo is what a HELLO reply tells of the server, as INFO's fields:
// redis_version, and for Valkey server_name and valkey_version. HELLO's
// version is Valkey's own there; every Valkey speaks Redis 7.2.
func helloInfo(reply any) map[string]string {
	info := map[string]string{"redis_version": "7.0"}
	version, ok := helloField(reply, "version")
	if !ok {
		return info
	}
	if server, _ := helloField(reply, "server"); server == "valkey" {
		info["server_name"], info["valkey_version"], info["redis_version"] = "valkey", version, "7.2"
		return info
	}
	info["redis_version"] = version
	return info
}

// serverName names the server and its version from INFO's server fields:
// "Redis 7.0.15", or "Valkey 8.0.1" (Valkey gives in redis_version the
// Redis version it is compatible with, 7.2.4, and its own in
// valkey_version).
func serverName(info map[string]string) string {
	if info["server_name"] == "valkey" && info["valkey_version"] != "" {
		return "Valkey " + info["valkey_version"]
	}
	return "Redis " + info["redis_version"]
}

func (d *doctor) run(ctx context.Context) error {
	seed := d.client(d.opt.Addr)
	info, err := readInfo(ctx, seed)
	if err != nil && strings.HasPrefix(err.Error(), "NOPERM") {
		// A limiter's own user may run the scripts and nothing else: check
		// what it may do, and say what needs an admin user.
		defer seed.Close()
		fmt.Fprintf(d.w, "redisrate doctor: %s (INFO refused to this user)\n", d.opt.Addr)
		d.say(levelWarn, "info", "INFO is refused (%v): only the ACL check runs as this user; run the doctor as an admin user with --acl-user for the rest", err)
		d.nodes = []*node{{addr: d.opt.Addr, c: seed, primary: true, info: map[string]string{"redis_version": "7.0"}}}
		if v, err := seed.Do(ctx, "HELLO").Result(); err == nil {
			d.nodes[0].info = helloInfo(v)
		}
		d.checkACL(ctx)
		d.nodes = nil
		fmt.Fprintf(d.w, "%s, %s\n", plural(d.fails, "problem", "problems"), plural(d.warns, "warning", "warnings"))
		return nil
	}
	if err != nil {
		_ = seed.Close()
		var rerr redis.Error
		if errors.As(err, &rerr) && !isNetErr(err) {
			return &exitError{code: exitRedis, err: fmt.Errorf("the server at %s refused INFO: %w", d.opt.Addr, err)}
		}
		return &exitError{code: exitUnreachable, err: fmt.Errorf("cannot reach Redis at %s: %w", d.opt.Addr, err)}
	}
	d.cluster = info["cluster_enabled"] == "1"
	seedNode := &node{addr: d.opt.Addr, c: seed, info: info, primary: info["role"] == "master"}
	if d.cluster {
		_ = seed.Close()
		if err := d.clusterNodes(ctx); err != nil {
			return &exitError{code: exitRedis, err: fmt.Errorf("CLUSTER SHARDS on %s: %w", d.opt.Addr, err)}
		}
	} else {
		d.nodes = []*node{seedNode}
		if seedNode.primary {
			for _, r := range replicasOf(info) {
				d.nodes = append(d.nodes, &node{addr: r.addr})
			}
		}
	}
	defer func() {
		for _, n := range d.nodes {
			if n.c != nil {
				_ = n.c.Close()
			}
		}
	}()
	for _, n := range d.nodes {
		if n.c == nil {
			n.c = d.client(n.addr)
		}
		if n.info == nil {
			n.info, n.err = readInfo(ctx, n.c)
		}
		n.offset, n.timeErr = clockOffset(ctx, n.c)
	}
	kind := "standalone"
	if d.cluster {
		kind = fmt.Sprintf("Cluster of %d nodes", len(d.nodes))
	} else if !seedNode.primary {
		kind = "a replica"
	}
	fmt.Fprintf(d.w, "redisrate doctor: %s (%s, %s)\n", d.opt.Addr, kind, serverName(info))
	for _, n := range d.nodes {
		if n.err != nil {
			d.say(levelFail, "reach", "%s: %v: the doctor cannot check this node, and the limiter may not reach it either", n.addr, n.err)
		}
	}
	d.checkVersion()
	d.checkRole(seedNode)
	d.checkMemory(ctx)
	d.checkPersistence(ctx)
	d.checkReplication()
	if d.cluster {
		d.checkCluster(ctx)
	}
	d.checkClock()
	d.checkScripts(ctx)
	d.checkFunctions(ctx)
	d.checkACL(ctx)
	fmt.Fprintf(d.w, "%s, %s\n", plural(d.fails, "problem", "problems"), plural(d.warns, "warning", "warnings"))
	return nil
}

// readInfo reads INFO into a map (role, versions, persistence, ...).
func readInfo(ctx context.Context, c redis.UniversalClient) (map[string]string, error) {
	s, err := c.Info(ctx, "server", "replication", "persistence", "memory", "cluster").Result()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// replica is one line "slave0:ip=...,port=...,state=online,offset=...,lag=0".
type replica struct {
	addr, state string
	lag         int
}

func replicasOf(info map[string]string) []replica {
	n, _ := strconv.Atoi(info["connected_slaves"])
	var out []replica
	for i := range n {
		f := map[string]string{}
		for _, kv := range strings.Split(info["slave"+strconv.Itoa(i)], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		lag, _ := strconv.Atoi(f["lag"])
		out = append(out, replica{addr: net.JoinHostPort(f["ip"], f["port"]), state: f["state"], lag: lag})
	}
	return out
}

// clusterNodes lists every node of the Cluster from CLUSTER SHARDS.
func (d *doctor) clusterNodes(ctx context.Context) error {
	c := d.client(d.opt.Addr)
	defer c.Close()
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return err
	}
	tlsOn := d.opt.TLSConfig != nil
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			port := n.Port
			if tlsOn && n.TLSPort != 0 {
				port = n.TLSPort
			}
			host := n.IP
			if n.Endpoint != "" && n.Endpoint != "?" {
				host = n.Endpoint
			}
			d.nodes = append(d.nodes, &node{addr: net.JoinHostPort(host, strconv.FormatInt(port, 10)), primary: n.Role == "master"})
		}
	}
	slices.SortStableFunc(d.nodes, func(a, b *node) int {
		if a.primary != b.primary {
			if a.primary {
				return -1
			}
			return 1
		}
		return strings.Compare(a.addr, b.addr)
	})
	return nil
}

// grouped reports one finding per distinct answer over nodes, naming the
// nodes when the deployment has more than one.
func (d *doctor) grouped(check string, nodes []*node, f func(n *node) (int, string)) {
	type key struct {
		level int
		msg   string
	}
	var order []key
	who := map[key][]string{}
	for _, n := range nodes {
		if n.err != nil {
			continue
		}
		l, m := f(n)
		k := key{l, m}
		if _, ok := who[k]; !ok {
			order = append(order, k)
		}
		who[k] = append(who[k], n.addr)
	}
	for _, k := range order {
		if len(d.nodes) > 1 {
			d.say(k.level, check, "%s: %s", strings.Join(who[k], ", "), k.msg)
		} else {
			d.say(k.level, check, "%s", k.msg)
		}
	}
}

func (d *doctor) primaries() []*node {
	var p []*node
	for _, n := range d.nodes {
		if n.primary {
			p = append(p, n)
		}
	}
	return p
}

// version compares "7.0.15" with major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// versionFinding judges a server by its INFO fields: what it runs by the
// Redis version it speaks (redis_version), named as serverName names it.
func versionFinding(info map[string]string) (int, string) {
	v, name := info["redis_version"], serverName(info)
	switch {
	case !versionAtLeast(v, 6, 2):
		return levelFail, fmt.Sprintf("%s: the scripts need Redis 6.2 or later; upgrade (7.0 or later also gives EVALSHA_RO and Functions)", name)
	case !versionAtLeast(v, 7, 0):
		return levelWarn, fmt.Sprintf("%s runs the scripts, but EVALSHA_RO (checks on replicas, WithReadOnlyCheck) and the Functions library need 7.0; upgrade to use them", name)
	default:
		return levelOK, fmt.Sprintf("%s: the scripts, EVALSHA_RO and the Functions library all run", name)
	}
}

func (d *doctor) checkVersion() {
	d.grouped("version", d.nodes, func(n *node) (int, string) { return versionFinding(n.info) })
}

func (d *doctor) checkRole(seed *node) {
	if !d.cluster && !seed.primary {
		d.say(levelFail, "role", "%s is a replica (of %s:%s): a limiter must write to the primary; point it there (replicas only serve Check with WithReadOnlyCheck)",
			seed.addr, seed.info["master_host"], seed.info["master_port"])
	}
}

// configGet reads one CONFIG GET parameter.
func configGet(ctx context.Context, c *redis.Client, name string) (string, error) {
	m, err := c.ConfigGet(ctx, name).Result()
	if err != nil {
		return "", err
	}
	return m[name], nil
}

// memoryFinding judges maxmemory and its policy.
func memoryFinding(maxmemory int64, policy string) (int, string) {
	if maxmemory == 0 {
		return levelOK, fmt.Sprintf("no maxmemory, so nothing is evicted (policy %s); watch the memory the host has", policy)
	}
	mb := fmt.Sprintf("%.0f MB", float64(maxmemory)/(1<<20))
	switch {
	case policy == "noeviction":
		return levelOK, fmt.Sprintf("noeviction with maxmemory %s: at the limit a call that would write fails with OOM (the failure policy answers), denials and checks are still decided, and no limit is reset; "+
			"FCALL of the library is refused with OOM even for a denial: a client then asks the _ro function (a check) or EVALSHA (the rest), as the Go client does", mb)
	case strings.HasPrefix(policy, "allkeys-"):
		return levelFail, fmt.Sprintf("%s with maxmemory %s: under memory pressure Redis evicts limiter keys, and each eviction silently resets a limit; set maxmemory-policy noeviction, or give the limiter its own instance", policy, mb)
	case strings.HasPrefix(policy, "volatile-"):
		return levelFail, fmt.Sprintf("%s with maxmemory %s: every limiter key has a TTL, so it may be evicted, which silently resets its limit; set maxmemory-policy noeviction, or give the limiter its own instance", policy, mb)
	default:
		return levelWarn, fmt.Sprintf("policy %q with maxmemory %s: unknown to the doctor; noeviction is the safe policy for a limiter", policy, mb)
	}
}

func (d *doctor) checkMemory(ctx context.Context) {
	d.grouped("maxmemory", d.primaries(), func(n *node) (int, string) {
		policy, err := configGet(ctx, n.c, "maxmemory-policy")
		if err != nil {
			policy = n.info["maxmemory_policy"]
		}
		maxmemory, _ := strconv.ParseInt(n.info["maxmemory"], 10, 64)
		if policy == "" {
			return levelWarn, fmt.Sprintf("cannot read maxmemory-policy (%v): make sure it is noeviction", err)
		}
		return memoryFinding(maxmemory, policy)
	})
}

func (d *doctor) checkPersistence(ctx context.Context) {
	d.grouped("persistence", d.primaries(), func(n *node) (int, string) {
		aof := n.info["aof_enabled"] == "1"
		save, err := configGet(ctx, n.c, "save")
		switch {
		case aof:
			return levelOK, "AOF on: limits survive a restart"
		case err != nil:
			return levelWarn, fmt.Sprintf("AOF off, and cannot read the RDB schedule (%v): without AOF or RDB a restart resets every limit", err)
		case strings.TrimSpace(save) == "":
			return levelWarn, "none (no AOF, no RDB snapshots): a restart resets every limit; set appendonly yes (appendfsync everysec), or accept it for limits that may reset"
		default:
			return levelOK, fmt.Sprintf("RDB snapshots (save %s), no AOF: a restart loses the decisions since the last snapshot; appendonly yes keeps them", save)
		}
	})
}

func (d *doctor) checkReplication() {
	for _, p := range d.primaries() {
		if p.err != nil {
			continue
		}
		reps := replicasOf(p.info)
		prefix := ""
		if len(d.nodes) > 1 {
			prefix = p.addr + ": "
		}
		if len(reps) == 0 {
			d.say(levelWarn, "replication", "%sno replica: a crash loses every limit on it until it restarts (and all of them without persistence); add a replica and Sentinel or Cluster failover", prefix)
			continue
		}
		for _, r := range reps {
			switch {
			case r.state != "online":
				d.say(levelFail, "replication", "%sreplica %s is %s, not online: it cannot take over with current state; check its link and logs", prefix, r.addr, r.state)
			case r.lag > 1:
				d.say(levelWarn, "replication", "%sreplica %s lags %d s: a failover now would lose the last %d s of decisions (up to that much admitted again)", prefix, r.addr, r.lag, r.lag)
			default:
				d.say(levelOK, "replication", "%sreplica %s online, lag %d s", prefix, r.addr, r.lag)
			}
		}
	}
}

func (d *doctor) checkCluster(ctx context.Context) {
	var first *node
	for _, n := range d.nodes {
		if n.err == nil {
			first = n
			break
		}
	}
	if first == nil {
		return
	}
	ci, err := first.c.ClusterInfo(ctx).Result()
	if err != nil {
		d.say(levelFail, "cluster", "CLUSTER INFO: %v", err)
		return
	}
	f := map[string]string{}
	for _, line := range strings.Split(ci, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	ok, _ := strconv.Atoi(f["cluster_slots_ok"])
	assigned, _ := strconv.Atoi(f["cluster_slots_assigned"])
	switch {
	case f["cluster_state"] != "ok" || ok < 16384:
		d.say(levelFail, "cluster", "cluster_state %s, %d of 16384 slots assigned, %d served (pfail %s, fail %s): keys on the other slots get CLUSTERDOWN; assign every slot (redis-cli --cluster fix) and bring failed nodes back",
			f["cluster_state"], assigned, ok, f["cluster_slots_pfail"], f["cluster_slots_fail"])
	default:
		d.say(levelOK, "cluster", "cluster_state ok, all 16384 slots served by %d primaries", len(d.primaries()))
	}
	// A slot's migration shows only in the "myself" line of the nodes
	// that take part in it.
	var moving []string
	for _, p := range d.primaries() {
		if p.err != nil {
			continue
		}
		nodes, err := p.c.ClusterNodes(ctx).Result()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(nodes, "\n") {
			if !strings.Contains(line, "myself") {
				continue
			}
			for _, fld := range strings.Fields(line) {
				if strings.HasPrefix(fld, "[") && (strings.Contains(fld, "->-") || strings.Contains(fld, "-<-")) {
					moving = append(moving, p.addr+" "+fld)
				}
			}
		}
	}
	if len(moving) > 0 {
		d.say(levelWarn, "cluster", "slots being migrated: %s; calls on them follow ASK meanwhile; finish or fix the migration (redis-cli --cluster fix)", strings.Join(moving, ", "))
	}
}

// clockOffset is TIME on c minus the midpoint of the round trip here.
func clockOffset(ctx context.Context, c *redis.Client) (time.Duration, error) {
	before := time.Now()
	tm, err := c.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	after := time.Now()
	return tm.Sub(before.Add(after.Sub(before) / 2)), nil
}

// clockFinding judges the spread of the nodes' clocks.
func clockFinding(spread time.Duration, nodes int) (int, string) {
	s := spread.Round(time.Millisecond)
	switch {
	case nodes < 2:
		return levelOK, "one node: failovers cannot step the clock"
	case spread > time.Second:
		return levelFail, fmt.Sprintf("the nodes' clocks differ by up to %v: after a failover to a node whose clock is behind, waits (RetryAfter, ResetAfter) grow by the difference and windows start late (never more admitted: contract guarantee 9); synchronise the clocks (NTP, chrony)", s)
	case spread > 100*time.Millisecond:
		return levelWarn, fmt.Sprintf("the nodes' clocks differ by up to %v: a failover steps the scripts' clock by that much; synchronise the clocks (NTP, chrony)", s)
	default:
		return levelOK, fmt.Sprintf("the nodes' clocks agree within %v", max(s, time.Millisecond))
	}
}

func (d *doctor) checkClock() {
	var lo, hi time.Duration
	n := 0
	var detail []string
	for _, nd := range d.nodes {
		if nd.err != nil || nd.timeErr != nil {
			if nd.err == nil {
				d.say(levelWarn, "clock", "%s: TIME: %v", nd.addr, nd.timeErr)
			}
			continue
		}
		if n == 0 || nd.offset < lo {
			lo = nd.offset
		}
		if n == 0 || nd.offset > hi {
			hi = nd.offset
		}
		n++
		detail = append(detail, fmt.Sprintf("%s %+v", nd.addr, nd.offset.Round(time.Millisecond)))
	}
	if n == 0 {
		return
	}
	level, msg := clockFinding(hi-lo, n)
	d.say(level, "clock", "%s (TIME against this machine: %s)", msg, strings.Join(detail, ", "))
}

func (d *doctor) checkScripts(ctx context.Context) {
	specs := scripts.Specs()
	shas := make([]string, 0, len(specs)+1)
	for _, s := range specs {
		shas = append(shas, s.SHA1)
	}
	shas = append(shas, scripts.ResetSHA1)
	d.grouped("scripts", d.primaries(), func(n *node) (int, string) {
		ok, err := n.c.ScriptExists(ctx, shas...).Result()
		if err != nil {
			return levelWarn, fmt.Sprintf("SCRIPT EXISTS: %v", err)
		}
		var missing []string
		for i, have := range ok {
			if !have {
				if i < len(specs) {
					missing = append(missing, specs[i].Name)
				} else {
					missing = append(missing, "reset")
				}
			}
		}
		if len(missing) == 0 {
			return levelOK, fmt.Sprintf("all %d bundled scripts and reset are cached (SHA1s match this build)", len(specs))
		}
		return levelOK, fmt.Sprintf("%d of %d cached; not cached: %s: the client sends them with EVAL on first use (or run redisrate load)",
			len(shas)-len(missing), len(shas), strings.Join(missing, ", "))
	})
}

func (d *doctor) checkFunctions(ctx context.Context) {
	d.grouped("functions", d.primaries(), func(n *node) (int, string) {
		if !versionAtLeast(n.info["redis_version"], 7, 0) {
			return levelOK, "Functions need Redis 7.0: the client uses EVALSHA"
		}
		libs, err := n.c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: scripts.LibraryName}).Result()
		if err != nil {
			return levelWarn, fmt.Sprintf("FUNCTION LIST: %v", err)
		}
		found := false
		for _, l := range libs {
			found = found || l.Name == scripts.LibraryName
		}
		if !found {
			return levelOK, "library redisrate not loaded (optional: redisrate functions --load); the client uses EVALSHA"
		}
		v, err := n.c.FCallRO(ctx, "redisrate_version", nil).Text()
		switch {
		case err != nil:
			return levelWarn, fmt.Sprintf("library redisrate loaded, but FCALL_RO redisrate_version 0: %v; reload it with redisrate functions --load", err)
		case v != scripts.LibraryVersion:
			return levelWarn, fmt.Sprintf("library redisrate version %s loaded, this build's is %s: the client falls back to EVALSHA; reload it with redisrate functions --load", v, scripts.LibraryVersion)
		default:
			return levelOK, "library redisrate loaded, version matches this build: the client calls FCALL"
		}
	})
}

// limiterCommand is one command a limiter sends, as ACL DRYRUN takes it
// and as a probe that writes nothing sends it (cost 0).
type limiterCommand struct {
	name     string
	args     []any
	minMajor int // the Redis major version that has the command
	optional bool
}

func (d *doctor) limiterCommands(key string) []limiterCommand {
	g, _ := scripts.Lookup("gcra")
	call := []any{1, key, 1, 1000, "", 0} // limit 1 per second, cost 0: reads, writes nothing
	with := func(head ...any) []any { return append(head, call...) }
	return []limiterCommand{
		{name: "EVALSHA", args: with("EVALSHA", g.SHA1), minMajor: 6},
		{name: "EVAL", args: with("EVAL", g.Source), minMajor: 6},
		{name: "EVALSHA_RO", args: append(with("EVALSHA_RO", g.SHA1), "check"), minMajor: 7},
		{name: "EVAL_RO", args: append(with("EVAL_RO", g.Source), "check"), minMajor: 7},
		{name: "FCALL", args: with("FCALL", g.Function), minMajor: 7},
		{name: "FCALL_RO", args: with("FCALL_RO", g.Function+"_ro"), minMajor: 7},
		{name: "SCRIPT LOAD", args: []any{"SCRIPT", "LOAD", g.Source}, minMajor: 6, optional: true},
	}
}

// scriptCalls are the commands the scripts call inside Redis, on the
// limiter's key: Redis checks them against the caller's ACL too. ACL
// DRYRUN of EVALSHA does not look inside the script, so they are checked
// one by one.
func scriptCalls(key string) [][]any {
	return [][]any{
		{"TIME"}, {"GET", key}, {"EXISTS", key}, {"TYPE", key}, {"DEL", key},
		{"PSETEX", key, 1000, "x"}, {"PEXPIRE", key, 1000},
		{"ZADD", key, 1, "m"}, {"ZCOUNT", key, 0, 1}, {"ZSCORE", key, "m"},
		{"ZRANGEBYSCORE", key, 0, 1}, {"ZREVRANGEBYSCORE", key, 1, 0}, {"ZREMRANGEBYSCORE", key, 0, 1},
	}
}

// limiterACLRules is the least-privilege rule set for a limiter's user on
// prefix: the scripts, the library, the commands the scripts call, and
// PING, which this command's connect (try, load) and health checks send.
func limiterACLRules(prefix string) string {
	return "resetkeys ~" + prefix + "* resetchannels -@all +ping +evalsha +eval +evalsha_ro +eval_ro +fcall +fcall_ro +script|load " +
		"+time +get +exists +type +del +psetex +pexpire +zadd +zcount +zscore +zrangebyscore +zrevrangebyscore +zremrangebyscore"
}

// nopermHint says which rule a user lacks for a NOPERM reply.
func nopermHint(user string, cmd limiterCommand, prefix string, err error) string {
	msg := err.Error()
	if strings.Contains(msg, "can't run this command") {
		return fmt.Sprintf("%s fails inside the script: %s: Redis checks a script's calls against its caller's ACL; allow them: ACL SETUSER %s %s",
			cmd.name, msg, user, "+time +get +exists +type +del +psetex +pexpire +zadd +zcount +zscore +zrangebyscore +zrevrangebyscore +zremrangebyscore")
	}
	if strings.Contains(msg, "keys") || strings.Contains(msg, "key") && !strings.Contains(msg, "command") {
		return fmt.Sprintf("%s is refused on %s*: %s; add the key pattern: ACL SETUSER %s ~%s*", cmd.name, prefix, msg, user, prefix)
	}
	return fmt.Sprintf("%s is refused: %s; add it: ACL SETUSER %s +%s", cmd.name, msg, user, strings.ToLower(strings.ReplaceAll(cmd.name, " ", "|")))
}

func (d *doctor) checkACL(ctx context.Context) {
	prim := d.primaries()
	var n *node
	for _, p := range prim {
		if p.err == nil {
			n = p
			break
		}
	}
	if n == nil {
		return
	}
	major, _ := strconv.Atoi(strings.SplitN(n.info["redis_version"], ".", 2)[0])
	user := d.aclUser
	if user == "" {
		who, err := n.c.Do(ctx, "ACL", "WHOAMI").Text()
		switch {
		case err == nil:
			user = who
		case d.opt.Username != "":
			user = d.opt.Username // ACL WHOAMI refused: the user of the URL
		default:
			user = "default"
		}
	}
	key := d.prefix + "redisrate-doctor"
	cmds := d.limiterCommands(key)
	// ACL DRYRUN (Redis 7) answers for any user without running anything;
	// it needs the ACL command itself, which a limiter's user lacks.
	dry := major >= 7
	if dry {
		if err := n.c.Do(ctx, "ACL", "DRYRUN", user, "PING").Err(); err != nil {
			if d.aclUser != "" {
				d.say(levelWarn, "acl", "ACL DRYRUN %s: %v: cannot check another user's permissions; run the doctor as an admin user, or as %s", user, err, user)
				return
			}
			dry = false
		}
	}
	var refused []string
	okCount := 0
	for _, cmd := range cmds {
		if major < cmd.minMajor {
			continue
		}
		var err error
		if dry {
			args := append([]any{"ACL", "DRYRUN", user}, cmd.args...)
			var reply string
			reply, err = n.c.Do(ctx, args...).Text()
			if err == nil && reply != "OK" {
				err = errors.New(reply)
			}
		} else {
			// As the user itself: a NOPERM comes before anything runs; any
			// other answer (a reply, NOSCRIPT, function not found) means
			// the command and key are allowed. The calls write nothing;
			// the script's own reads (TIME, GET, ...) run and are checked.
			err = n.c.Do(ctx, cmd.args...).Err()
			if err != nil && !strings.HasPrefix(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "permission") && !strings.Contains(err.Error(), "can't run this command") {
				err = nil
			}
		}
		if err != nil {
			level := levelFail
			if cmd.optional {
				level = levelWarn
			}
			d.say(level, "acl", "user %s: %s", user, nopermHint(user, cmd, d.prefix, err))
			refused = append(refused, cmd.name)
			continue
		}
		okCount++
	}
	if dry {
		// The commands inside the scripts.
		var missing []string
		for _, c := range scriptCalls(key) {
			r, err := n.c.Do(ctx, append([]any{"ACL", "DRYRUN", user}, c...)...).Text()
			if err == nil && r != "OK" {
				missing = append(missing, strings.ToLower(fmt.Sprint(c[0])))
			}
		}
		if len(missing) > 0 {
			d.say(levelFail, "acl", "user %s may not run %s on %s*, which the scripts call (Redis checks a script's calls against its caller's ACL): every call fails; add them: ACL SETUSER %s +%s",
				user, strings.Join(missing, ", "), d.prefix, user, strings.Join(missing, " +"))
			refused = append(refused, missing...)
		}
	}
	if len(refused) == 0 {
		how := "calls that write nothing"
		if dry {
			how = "ACL DRYRUN"
		}
		d.say(levelOK, "acl", "user %s may run all %d commands a limiter sends on %s*, and the commands the scripts call (by %s)", user, okCount, d.prefix, how)
	}
	if dry {
		var extra []string
		for _, c := range [][]any{{"FLUSHALL"}, {"CONFIG", "SET", "maxmemory-policy", "noeviction"}, {"GET", "not-" + d.prefix + "key"}} {
			if r, err := n.c.Do(ctx, append([]any{"ACL", "DRYRUN", user}, c...)...).Text(); err == nil && r == "OK" {
				extra = append(extra, fmt.Sprint(c[0]))
			}
		}
		if len(extra) > 0 {
			d.say(levelWarn, "acl", "user %s may also run %s: more than a limiter needs; give it its own user: ACL SETUSER limiter on >PASSWORD %s",
				user, strings.Join(extra, ", "), limiterACLRules(d.prefix))
		}
	}
}
