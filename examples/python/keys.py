# The Redis keys redisrate's Go middleware (httplimit, grpclimit) uses, from
# Python: a service in another language that limits the same clients computes
# the same keys and shares their state. python3 keys.py
import hashlib
import hmac
import ipaddress

PREFIX, NAME = "redisrate:", "api"  # WithKeyPrefix("redisrate:"), Config.Name "api"


def ip_key(addr, ipv6_prefix=64):
    """ClientIP: an IPv4 address whole; IPv6 by its /64 (IPv6Prefix)."""
    ip = ipaddress.ip_address(addr)
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if ip.version == 6 and ipv6_prefix < 128:
        return "ip:" + str(ipaddress.ip_network(f"{ip}/{ipv6_prefix}", strict=False))
    return "ip:" + str(ip)


def api_key_key(secret, api_key):
    """APIKey: HMAC-SHA256(secret, API key), its first 16 bytes in hex."""
    return "key:" + hmac.new(secret, api_key.encode(), hashlib.sha256).digest()[:16].hex()


def tag_value(v):
    return v.replace("%", "%25").replace("}", "%7D")


def scoped_keys(segment, key, scopes):
    """Config.Scopes: scopes is [(name, value)], broadest last; the request's key first."""
    tag = "{%s:%s:%s}" % (NAME, scopes[-1][0], tag_value(scopes[-1][1]))
    return [PREFIX + tag + ":" + segment + ":" + key] + \
        [PREFIX + tag + ":" + n + ":" + v for n, v in scopes[:-1]] + [PREFIX + tag]


secret = b"an example secret, 16+ bytes"
print(PREFIX + NAME + ":" + ip_key("203.0.113.7"))
print(PREFIX + NAME + ":" + ip_key("2001:db8:1:2:3:4:5:6"))
print(PREFIX + NAME + ":" + api_key_key(secret, "k-123"))
print(" ".join(scoped_keys(NAME, api_key_key(secret, "k-123"), [("account", "42")])))
