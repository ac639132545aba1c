# A user's limit and its organisation's in one call of redisrate's GCRA script
# from Ruby (redis-rb), contract v2.1, several keys: admitted only if both
# limits admit, then recorded on both keys; otherwise neither key is written.
# Each argument is a user of organisation 7 making one request.
# REDIS_ADDR=127.0.0.1:6379 ruby twokeys.rb 42 42 42 43 43
require "redis"

FIELDS = %i[allowed remaining retry_after_ms reset_after_ms capacity binding].freeze

host, _, port = ENV.fetch("REDIS_ADDR", "127.0.0.1:6379").rpartition(":")
REDIS = Redis.new(host: host, port: Integer(port))
SOURCE = File.read(File.expand_path("../../scripts/gcra.lua", __dir__))
SHA = REDIS.script(:load, SOURCE)

# limits: 2 to 8 [key, limit, period_ms], keys sharing a hash tag; limit i guards key i.
def allow_all(limits, cost: 1)
  keys = limits.map(&:first)
  args = [limits[0][1], limits[0][2], 0, cost, ""] # limit period_ms burst cost mode
  limits.drop(1).each { |_, limit, period_ms| args.push(limit, period_ms, 0) } # burst 0: = limit
  reply = begin
    REDIS.evalsha(SHA, keys: keys, argv: args)
  rescue Redis::CommandError => e
    raise unless e.message.start_with?("NOSCRIPT") # a restart or a failover lost it
    REDIS.eval(SOURCE, keys: keys, argv: args)
  end
  unless reply.is_a?(Array) && reply.size >= 6 && reply.first(6).all?(Integer) && reply[5].between?(1, keys.size)
    raise "not a redisrate reply: #{reply.inspect}"
  end
  FIELDS.zip(reply).to_h.merge(key: keys[reply[5] - 1]) # binding i names the key whose limit bound
end

org = "{org:#{ENV.fetch("ORG_ID", "7")}}" # the hash tag: one Cluster slot for both keys
ARGV.each do |user|
  res = allow_all([["#{org}:user:#{user}", 2, 60_000], [org, 3, 60_000]]) # 2 and 3 per minute
  puts "user=#{user} " + FIELDS.map { |f| "#{f}=#{res[f]}" }.join(" ") + " key=#{res[:key]}"
end
