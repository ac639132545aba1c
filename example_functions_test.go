package redisrate_test

import (
	"fmt"
	"strings"

	"github.com/redisrate/redisrate"
)

// Load the library once (or run "redisrate functions --load --redis ADDR"),
// then call the functions from any client:
//
//	rdb.FunctionLoadReplace(ctx, redisrate.FunctionsLibrary())
//	rdb.FCall(ctx, "redisrate_gcra", []string{"user:42"}, 10, 1000)
//	rdb.FCallRO(ctx, "redisrate_gcra_ro", []string{"user:42"}, 10, 1000) // a check, on a replica too
func ExampleFunctionsLibrary() {
	lib := redisrate.FunctionsLibrary()
	fmt.Println(lib[:strings.IndexByte(lib, '\n')])
	for _, s := range redisrate.Scripts() {
		fmt.Println(s.Algorithm.FunctionName(), s.Algorithm.FunctionName()+"_ro")
	}
	// Output:
	// #!lua name=redisrate
	// redisrate_gcra redisrate_gcra_ro
	// redisrate_token_bucket redisrate_token_bucket_ro
	// redisrate_leaky_bucket redisrate_leaky_bucket_ro
	// redisrate_sliding_window redisrate_sliding_window_ro
	// redisrate_fixed_window redisrate_fixed_window_ro
	// redisrate_sliding_log redisrate_sliding_log_ro
}
