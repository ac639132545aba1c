// Call redisrate's GCRA script from Node (ioredis), contract v2: load it,
// call it, read the reply's fields by name. REDIS_ADDR=127.0.0.1:6379 node ratelimit.js
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const Redis = require("ioredis");

const FIELDS = ["allowed", "remaining", "retry_after_ms", "reset_after_ms", "capacity", "binding"];

const addr = process.env.REDIS_ADDR || "127.0.0.1:6379";
const i = addr.lastIndexOf(":");
const redis = new Redis({ host: addr.slice(0, i), port: Number(addr.slice(i + 1)), maxRetriesPerRequest: 1 });
const source = fs.readFileSync(path.join(__dirname, "..", "..", "scripts", "gcra.lua"), "utf8");
redis.defineCommand("gcra", { numberOfKeys: 1, lua: source }); // EVALSHA, or EVAL when the server lacks it

// Whole numbers only; burst 0 means burst = limit, cost 0 only reads.
async function allow(key, limit, periodMs, burst = 0, cost = 1) {
  const reply = await redis.gcra(key, limit, periodMs, burst, cost);
  if (!Array.isArray(reply) || reply.length < 6 || !reply.slice(0, 6).every(Number.isInteger)) {
    throw new Error(`not a redisrate reply: ${JSON.stringify(reply)}`);
  }
  return Object.fromEntries(FIELDS.map((f, n) => [f, reply[n]])); // appended fields: ignored
}

async function main() {
  const key = process.env.RATE_KEY || "user:42";
  for (let n = 0; n < 3; n++) {
    const res = await allow(key, 2, 60000); // 2 per minute
    console.log(FIELDS.map((f) => `${f}=${res[f]}`).join(" "));
  }
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => redis.disconnect());
