module github.com/redisrate/redisrate/otelrate

go 1.22.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/redis/go-redis/extra/redisotel/v9 v9.17.3
	github.com/redis/go-redis/v9 v9.17.3
	github.com/redisrate/redisrate v0.0.0
	go.opentelemetry.io/otel v1.22.0
	go.opentelemetry.io/otel/metric v1.22.0
	go.opentelemetry.io/otel/sdk v1.22.0
	go.opentelemetry.io/otel/sdk/metric v1.22.0
	go.opentelemetry.io/otel/trace v1.22.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/go-logr/logr v1.4.1 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/redis/go-redis/extra/rediscmd/v9 v9.17.3 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	golang.org/x/sys v0.16.0 // indirect
)
