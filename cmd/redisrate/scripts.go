package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/redisrate/redisrate/scripts"
)

// bundled is one .lua file of the scripts package: a script of an
// algorithm, or the reset script.
type bundled struct {
	name, source, sha1, summary string
}

// bundledScripts returns the six scripts, in the contract's order, then
// reset.lua, with the facts the manifest (scripts.Specs) gives.
func bundledScripts() []bundled {
	var out []bundled
	for _, s := range scripts.Specs() {
		out = append(out, bundled{s.Name, s.Source, s.SHA1, s.Summary})
	}
	return append(out, bundled{"reset", scripts.ResetSource, scripts.ResetSHA1,
		"deletes the key only when it holds the state of one of the scripts"})
}

var scriptsCommand = command{
	name:    "scripts",
	summary: "list the bundled Lua scripts with their SHA1s, or write them to a directory",
	usage: `Usage: redisrate scripts [--dir DIR] [--force]

Lists the bundled Lua scripts (script contract v4), one per algorithm and the
reset script, with the SHA1 that EVALSHA takes, after a line naming the release
they come from: pin that and the SHA1s. With --dir, writes them there
as NAME.lua, byte for byte what the Go client runs, for services in other
languages to SCRIPT LOAD. A file already there with other contents is left
alone unless --force is given.

Every algorithm script is called the same way and replies the same way:

  EVALSHA SHA1 1 KEY LIMIT PERIOD_MS [BURST [COST [MODE [LIMIT PERIOD_MS BURST]...]]]
  EVALSHA SHA1 K KEY1 ... KEYK LIMIT PERIOD_MS [BURST [COST [MODE [LIMIT PERIOD_MS BURST]...]]]
  -> allowed remaining retry_after_ms reset_after_ms capacity binding units

With one key, it holds every limit (up to 8). With K keys (2 to 8, sharing a
hash tag), limit i guards KEYi, all or nothing; binding i names it. MODE is
empty, check, upto (a lease: what there is, up to COST), refund (give COST
back) or force (record COST whatever the limits say).

Arguments are whole numbers; see CONTRACT.md, or the header of any script.
`,
	setup: func(fs *flag.FlagSet) func(context.Context, []string, io.Writer) error {
		dir := fs.String("dir", "", "write the scripts into `DIR` (created if missing)")
		force := fs.Bool("force", false, "with --dir, replace files that hold something else (an older version)")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if len(args) > 0 {
				return usageErr("unexpected argument %q", args[0])
			}
			if *force && *dir == "" {
				return usageErr("--force needs --dir")
			}
			fmt.Fprintln(stdout, release())
			if *dir == "" {
				for _, s := range bundledScripts() {
					fmt.Fprintf(stdout, "%-15s %s  %5d bytes  %s\n", s.name, s.sha1, len(s.source), s.summary)
				}
				return nil
			}
			return writeScripts(*dir, *force, stdout)
		}
	},
}

// release names what a service outside Go pins beside the SHA1s: the
// release of redisrate this command was built from (the module's tag when
// installed by go install ...@v0.X.Y), and the contract the scripts keep.
func release() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) { // Deps: built inside another module
			if m.Path == "github.com/redisrate/redisrate" && m.Version != "" {
				v = m.Version
			}
		}
	}
	if v == "(devel)" {
		v = "(devel: built from a checkout, no release tag)"
	}
	return fmt.Sprintf("redisrate %s, script contract v%s", v, scripts.ContractVersion)
}

// writeScripts writes every script into dir. It checks every file before
// writing any, so a refusal leaves the directory as it was.
func writeScripts(dir string, force bool, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return localErr(err)
	}
	all := bundledScripts()
	for _, s := range all {
		path := filepath.Join(dir, s.name+".lua")
		old, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return localErr(err)
		case !force && !bytes.Equal(old, []byte(s.source)):
			return localErr(fmt.Errorf("%s exists with other contents; left untouched (use --force to replace it)", path))
		}
	}
	for _, s := range all {
		path := filepath.Join(dir, s.name+".lua")
		if err := os.WriteFile(path, []byte(s.source), 0o644); err != nil {
			return localErr(err)
		}
		fmt.Fprintf(stdout, "%s  %s\n", s.sha1, path)
	}
	return nil
}

var loadCommand = command{
	name:    "load",
	summary: "SCRIPT LOAD every script on every primary and print the SHA1s",
	usage: `Usage: redisrate load --redis ADDR [--tls-ca FILE]

Runs SCRIPT LOAD for every bundled script (the six algorithms and reset) on
the server, or on every primary of a Redis Cluster, and prints the SHA1s to
call them with EVALSHA. Clients that fall back to EVAL on NOSCRIPT do not
need this; deploy pipelines of services that only call EVALSHA do.
`,
	setup: func(fs *flag.FlagSet) func(context.Context, []string, io.Writer) error {
		addr := fs.String("redis", "", redisFlagHelp)
		ca := fs.String("tls-ca", "", tlsCAFlagHelp)
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if len(args) > 0 {
				return usageErr("unexpected argument %q", args[0])
			}
			rdb, err := connect(ctx, *addr, *ca)
			if err != nil {
				return err
			}
			defer rdb.Close()
			all := bundledScripts()
			primaries, err := forEachPrimary(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
				for _, s := range all {
					sha, err := c.ScriptLoad(ctx, s.source).Result()
					if err != nil {
						return fmt.Errorf("SCRIPT LOAD %s: %w", s.name, err)
					}
					if sha != s.sha1 {
						return &exitError{code: exitRedis, err: fmt.Errorf("SCRIPT LOAD %s: the server names it %s, not %s", s.name, sha, s.sha1)}
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "loaded %d scripts on %s: %s\n", len(all), plural(len(primaries), "primary", "primaries"), strings.Join(primaries, ", "))
			for _, s := range all {
				fmt.Fprintf(stdout, "%-15s %s\n", s.name, s.sha1)
			}
			return nil
		}
	},
}

// versionFunction is the library's function that returns its version.
const versionFunction = scripts.LibraryName + "_version"

var functionsCommand = command{
	name:    "functions",
	summary: "print the Redis Functions library, or load it with FUNCTION LOAD REPLACE",
	usage: `Usage: redisrate functions [--load --redis ADDR [--tls-ca FILE]]

Prints the Redis Functions library (Redis 7 and later) named redisrate, which
the Go client prefers to the scripts when it is loaded. It registers, for each
algorithm, redisrate_ALGORITHM (redisrate_gcra, redisrate_token_bucket,
redisrate_leaky_bucket, redisrate_sliding_window, redisrate_fixed_window,
redisrate_sliding_log), taking the same arguments and giving the same reply
as the script:

  FCALL redisrate_gcra 1 KEY LIMIT PERIOD_MS [BURST [COST [MODE [LIMIT PERIOD_MS BURST]...]]]

and redisrate_ALGORITHM_ro, flagged no-writes for FCALL_RO (on replicas too),
which always decides as mode "check": exactly as a real call would, recording
nothing. FCALL_RO redisrate_version 0 returns the library's version (the SHA1
of its code).

Each function runs its script's code, with what runs once (helpers, cached
globals) defined once at FUNCTION LOAD. With --load --redis ADDR, runs
FUNCTION LOAD REPLACE on the server, or on every primary of a Cluster, and
checks the version each one reports.
`,
	setup: func(fs *flag.FlagSet) func(context.Context, []string, io.Writer) error {
		load := fs.Bool("load", false, "load the library into Redis (FUNCTION LOAD REPLACE) instead of printing it")
		addr := fs.String("redis", "", redisFlagHelp+"; with --load")
		ca := fs.String("tls-ca", "", tlsCAFlagHelp)
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if len(args) > 0 {
				return usageErr("unexpected argument %q", args[0])
			}
			if !*load {
				if *addr != "" {
					return usageErr("--redis needs --load (without it the library is only printed)")
				}
				if *ca != "" {
					return usageErr("--tls-ca needs --load --redis (without --load the library is only printed)")
				}
				_, err := io.WriteString(stdout, scripts.Library)
				return err
			}
			if *addr == "" {
				return usageErr("--load needs --redis ADDR")
			}
			rdb, err := connect(ctx, *addr, *ca)
			if err != nil {
				return err
			}
			defer rdb.Close()
			primaries, err := forEachPrimary(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
				name, err := c.FunctionLoadReplace(ctx, scripts.Library).Result()
				if err != nil {
					if strings.Contains(err.Error(), "unknown command") {
						return &exitError{code: exitRedis, err: fmt.Errorf("FUNCTION LOAD: %w (Redis Functions need Redis 7.0 or later; use \"redisrate load\" for the scripts)", err)}
					}
					return fmt.Errorf("FUNCTION LOAD REPLACE: %w", err)
				}
				if name != scripts.LibraryName {
					return &exitError{code: exitRedis, err: fmt.Errorf("FUNCTION LOAD REPLACE: the server named the library %q, not %q", name, scripts.LibraryName)}
				}
				v, err := c.FCallRO(ctx, versionFunction, nil).Text()
				if err != nil {
					return fmt.Errorf("FCALL_RO %s: %w", versionFunction, err)
				}
				if v != scripts.LibraryVersion {
					return &exitError{code: exitRedis, err: fmt.Errorf("FCALL_RO %s: the server reports version %s, not %s", versionFunction, v, scripts.LibraryVersion)}
				}
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "loaded library %s (version %s) on %s: %s\n", scripts.LibraryName, scripts.LibraryVersion, plural(len(primaries), "primary", "primaries"), strings.Join(primaries, ", "))
			for _, s := range scripts.Specs() {
				fmt.Fprintf(stdout, "  FCALL %-31s FCALL_RO %s_ro\n", s.Function, s.Function)
			}
			return nil
		}
	},
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
