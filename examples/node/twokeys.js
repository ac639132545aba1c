// A user's limit and its organisation's in one call of redisrate's GCRA script
// from Node (ioredis), contract v2.1, several keys: admitted only if both
// limits admit, then recorded on both keys; otherwise neither key is written.
// Each argument is a user of organisation 7 making one request.
// REDIS_ADDR=127.0.0.1:6379 node twokeys.js 42 42 42 43 43
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const Redis = require("ioredis");

const FIELDS = ["allowed", "remaining", "retry_after_ms", "reset_after_ms", "capacity", "binding"];

const addr = process.env.REDIS_ADDR || "127.0.0.1:6379";
const i = addr.lastIndexOf(":");
const redis = new Redis({ host: addr.slice(0, i), port: Number(addr.slice(i + 1)), maxRetriesPerRequest: 1 });
const source = fs.readFileSync(path.join(__dirname, "..", "..", "scripts", "gcra.lua"), "utf8");
// No numberOfKeys: each call passes its key count first. EVALSHA, or EVAL when the server lacks it.
redis.defineCommand("gcra", { lua: source });

// limits: 2 to 8 [key, limit, periodMs], keys sharing a hash tag; limit i guards key i.
async function allowAll(limits, cost = 1) {
  const keys = limits.map(([key]) => key);
  const args = [limits[0][1], limits[0][2], 0, cost, ""]; // limit period_ms burst cost mode
  for (const [, limit, periodMs] of limits.slice(1)) args.push(limit, periodMs, 0); // burst 0: = limit
  const reply = await redis.gcra(keys.length, ...keys, ...args);
  if (!Array.isArray(reply) || reply.length < 6 || !reply.slice(0, 6).every(Number.isInteger) ||
      reply[5] < 1 || reply[5] > keys.length) {
    throw new Error(`not a redisrate reply: ${JSON.stringify(reply)}`);
  }
  const res = Object.fromEntries(FIELDS.map((f, n) => [f, reply[n]])); // appended fields: ignored
  res.key = keys[res.binding - 1]; // binding i names the key whose limit bound
  return res;
}

async function main() {
  const org = `{org:${process.env.ORG_ID || "7"}}`; // the hash tag: one Cluster slot for both keys
  for (const user of process.argv.slice(2)) {
    const res = await allowAll([[`${org}:user:${user}`, 2, 60000], [org, 3, 60000]]); // 2 and 3 per minute
    console.log(`user=${user} ` + FIELDS.map((f) => `${f}=${res[f]}`).join(" ") + ` key=${res.key}`);
  }
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => redis.disconnect());
