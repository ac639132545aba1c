# Call redisrate's GCRA script from Ruby (redis-rb), contract v2: load it,
# call it, read the reply's fields by name. REDIS_ADDR=127.0.0.1:6379 ruby ratelimit.rb
require "redis"

FIELDS = %i[allowed remaining retry_after_ms reset_after_ms capacity binding].freeze

host, _, port = ENV.fetch("REDIS_ADDR", "127.0.0.1:6379").rpartition(":")
REDIS = Redis.new(host: host, port: Integer(port))
SOURCE = File.read(File.expand_path("../../scripts/gcra.lua", __dir__))
SHA = REDIS.script(:load, SOURCE)

# Whole numbers only; burst 0 means burst = limit, cost 0 only reads.
def allow(key, limit, period_ms, burst: 0, cost: 1)
  args = [limit, period_ms, burst, cost]
  reply = begin
    REDIS.evalsha(SHA, keys: [key], argv: args)
  rescue Redis::CommandError => e
    raise unless e.message.start_with?("NOSCRIPT") # a restart or a failover lost it
    REDIS.eval(SOURCE, keys: [key], argv: args)
  end
  unless reply.is_a?(Array) && reply.size >= 6 && reply.first(6).all?(Integer)
    raise "not a redisrate reply: #{reply.inspect}"
  end
  FIELDS.zip(reply).to_h # later versions may append fields: ignored
end

key = ENV.fetch("RATE_KEY", "user:42")
3.times do
  res = allow(key, 2, 60_000) # 2 per minute
  puts FIELDS.map { |f| "#{f}=#{res[f]}" }.join(" ")
end
