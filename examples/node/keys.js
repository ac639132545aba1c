// The Redis keys redisrate's Go middleware (httplimit, grpclimit) uses, from
// Node: a service in another language that limits the same clients computes
// the same keys and shares their state. node keys.js
const crypto = require("node:crypto");
const net = require("node:net");

const PREFIX = "redisrate:", NAME = "api"; // WithKeyPrefix("redisrate:"), Config.Name "api"

// ClientIP: an IPv4 address whole; IPv6 by its /64 (IPv6Prefix), written as
// RFC 5952 says (lower case, the longest run of zero groups as "::").
function ipKey(addr, ipv6Prefix = 64) {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(addr);
  if (mapped) addr = mapped[1];
  if (net.isIPv4(addr)) return "ip:" + addr.split(".").map(Number).join(".");
  if (!net.isIPv6(addr)) throw new Error(`not an IP address: ${addr}`);
  const v4 = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(addr); // an IPv4 tail: two groups
  if (v4) addr = v4[1] + ((v4[2] << 8) | v4[3]).toString(16) + ":" + ((v4[4] << 8) | v4[5]).toString(16);
  const [head, tail = ""] = addr.toLowerCase().split("::");
  const h = head ? head.split(":") : [], t = tail ? tail.split(":") : [];
  let groups = addr.includes("::") ? [...h, ...Array(8 - h.length - t.length).fill("0"), ...t] : h;
  groups = groups.map((g) => parseInt(g, 16));
  if (ipv6Prefix >= 128) return "ip:" + ipv6String(groups);
  groups = groups.map((g, i) => {
    const bits = Math.min(Math.max(ipv6Prefix - 16 * i, 0), 16);
    return g & (0xffff << (16 - bits)) & 0xffff;
  });
  return "ip:" + ipv6String(groups) + "/" + ipv6Prefix;
}

function ipv6String(groups) {
  let best = -1, bestLen = 1; // a single zero group is not shortened
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(":");
  return hex.slice(0, best).join(":") + "::" + hex.slice(best + bestLen).join(":");
}

// APIKey: HMAC-SHA256(secret, API key), its first 16 bytes in hex.
function apiKeyKey(secret, apiKey) {
  return "key:" + crypto.createHmac("sha256", secret).update(apiKey).digest().subarray(0, 16).toString("hex");
}

const tagValue = (v) => v.replaceAll("%", "%25").replaceAll("}", "%7D");

// Config.Scopes: scopes is [[name, value]], broadest last; the request's key first.
function scopedKeys(segment, key, scopes) {
  const [lastName, lastValue] = scopes[scopes.length - 1];
  const tag = `{${NAME}:${lastName}:${tagValue(lastValue)}}`;
  return [PREFIX + tag + ":" + segment + ":" + key,
    ...scopes.slice(0, -1).map(([n, v]) => PREFIX + tag + ":" + n + ":" + v), PREFIX + tag];
}

const secret = Buffer.from("an example secret, 16+ bytes");
console.log(PREFIX + NAME + ":" + ipKey("203.0.113.7"));
console.log(PREFIX + NAME + ":" + ipKey("2001:db8:1:2:3:4:5:6"));
console.log(PREFIX + NAME + ":" + apiKeyKey(secret, "k-123"));
console.log(scopedKeys(NAME, apiKeyKey(secret, "k-123"), [["account", "42"]]).join(" "));
