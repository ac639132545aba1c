# The Redis keys redisrate's Go middleware (httplimit, grpclimit) uses, from
# Ruby: a service in another language that limits the same clients computes
# the same keys and shares their state. ruby keys.rb
require "ipaddr"
require "openssl"

PREFIX, NAME = "redisrate:", "api" # WithKeyPrefix("redisrate:"), Config.Name "api"

# ClientIP: an IPv4 address whole; IPv6 by its /64 (IPv6Prefix).
def ip_key(addr, ipv6_prefix = 64)
  ip = IPAddr.new(addr)
  ip = ip.native if ip.ipv4_mapped?
  return "ip:#{ip}" if ip.ipv4? || ipv6_prefix >= 128
  "ip:#{ip.mask(ipv6_prefix)}/#{ipv6_prefix}"
end

# APIKey: HMAC-SHA256(secret, API key), its first 16 bytes in hex.
def api_key_key(secret, api_key)
  "key:" + OpenSSL::HMAC.digest("SHA256", secret, api_key)[0, 16].unpack1("H*")
end

def tag_value(v)
  v.gsub("%", "%25").gsub("}", "%7D")
end

# Config.Scopes: scopes is [[name, value]], broadest last; the request's key first.
def scoped_keys(segment, key, scopes)
  tag = "{#{NAME}:#{scopes[-1][0]}:#{tag_value(scopes[-1][1])}}"
  [PREFIX + tag + ":" + segment + ":" + key] +
    scopes[0...-1].map { |n, v| PREFIX + tag + ":" + n + ":" + v } + [PREFIX + tag]
end

secret = "an example secret, 16+ bytes"
puts PREFIX + NAME + ":" + ip_key("203.0.113.7")
puts PREFIX + NAME + ":" + ip_key("2001:db8:1:2:3:4:5:6")
puts PREFIX + NAME + ":" + api_key_key(secret, "k-123")
puts scoped_keys(NAME, api_key_key(secret, "k-123"), [["account", "42"]]).join(" ")
