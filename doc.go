// Package redisrate is a rate limiter for services that already run Redis.
//
// The decisions are made by atomic Lua scripts, one per algorithm, that read
// the clock with Redis TIME: GCRA, token bucket, leaky bucket, sliding
// window, fixed window and sliding log. The scripts are the product: package
// scripts holds them (and the Functions library) for any other stack. This
// package runs them from Go and decodes their replies into Result.
//
// Where things are:
//
//	limiter.go    Limiter, NewLimiter, With, Option, Request, KeyLimit: the types every stage shares
//	engine.go     Allow, AllowN, Decide, Reset and run, where every call starts; the stages of one attempt: deny cache, send, settle, failure, shadow, probe
//	plan.go       op, one call as it moves through the stages; the plan stage: a Request validated and made an op (keys, cost, mode); Args
//	limit.go      Limit, ParseLimit, Validate
//	algorithm.go  Algorithm, ParseAlgorithm: the scripts' manifest, by algorithm
//	calendar.go   calendar limits (Limit.Calendar): the window, its key and period (the plan resolves them; the settle stage's waits end with the window)
//	result.go     Result, Source
//	deadline.go   the decision deadline
//	sender.go     the goroutines that send for callers who must be able to leave at their deadline
//	shadow.go     shadow mode (WithShadowMode)
//	loader.go     FCALL / EVALSHA / EVAL of the embedded scripts
//	denycache.go  the deny cache (WithDenyCache), which the engine's deny stage asks
//	failure.go    failure policy, fallback
//	clock.go      the clock: everything the Limiter does with time, real or a test's
//	breaker.go    circuit breaker: each node's health, when to probe, the log of each outage
//	observer.go   the Observer hook (metrics, traces)
//	batch.go      DecideBatch: many requests, through the stages together
//	coalesce.go   hot keys: calls of one key in flight decided together, in one upto
//	pipe.go       calls of different keys in flight sent together, one pipeline per node
//	pipeline.go   one pipeline of script calls, sent once (never resent after a network error)
//	reservation.go  Reserve, Reservation: take now, settle later (refund or force); leases
//	close.go      Limiter.Close: leases given back, background work ended
//	wait.go       Wait, WaitN: a loop of attempts over one plan
//	errors.go     the errors and how they are classified
//	algorithm_gen.go  the Algorithm constants, generated with the scripts from their manifests
//
// It works with every go-redis v9 client: *redis.Client,
// *redis.ClusterClient, *redis.Ring, the Sentinel failover client and
// redis.UniversalClient.
package redisrate
