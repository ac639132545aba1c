package scripts_test

import (
	"fmt"

	"github.com/redisrate/redisrate/scripts"
)

// Every script, with the function that holds it in the Functions library.
func ExampleSpecs() {
	for _, s := range scripts.Specs() {
		fmt.Println(s.Name+".lua", s.Function)
	}
	// Output:
	// gcra.lua redisrate_gcra
	// token_bucket.lua redisrate_token_bucket
	// leaky_bucket.lua redisrate_leaky_bucket
	// sliding_window.lua redisrate_sliding_window
	// fixed_window.lua redisrate_fixed_window
	// sliding_log.lua redisrate_sliding_log
}

// A script's source, to SCRIPT LOAD from any client, and the SHA1 that
// EVALSHA then calls it by.
func ExampleLookup() {
	s, ok := scripts.Lookup("sliding_log")
	fmt.Println(ok, len(s.Source) > 0, len(s.SHA1), s.Summary)
	// Output: true true 40 sliding log: one sorted-set entry per admitted unit; exact over any span, for small limits
}
