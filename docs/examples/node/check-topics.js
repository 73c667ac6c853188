// Reads blackjack.events, blackjack.command-results and blackjack.commands from their start
// (read_committed) and checks every record against the published contract only: its body
// against schemas/ (JSON Schema 2020-12, Ajv strict), its headers and key against
// schemas/asyncapi.json, and every integer against 2^53 (JSON.parse rounds past it).
// Stops once no record came for IDLE_MS; exit 1 if any record failed. docs/kafka.md,
// "From another language". Not part of the repository's test run.
//   npm install && KAFKA_BOOTSTRAP=127.0.0.1:9092 node check-topics.js
const fs = require("fs");
const path = require("path");
const Ajv2020 = require("ajv/dist/2020"); // the dialect the schemas name in $schema
const Ajv07 = require("ajv"); // AsyncAPI 3.0's schema format is a JSON Schema draft-07 superset
const addFormats = require("ajv-formats"); // date-time, date, int64
const { Kafka, logLevel } = require("kafkajs");

const SCHEMAS = process.env.SCHEMAS || path.join(__dirname, "..", "..", "..", "schemas");
const PREFIX = process.env.BLACKJACK_TOPIC_PREFIX || "";
const IDLE_MS = Number(process.env.IDLE_MS || 3000);
const read = (f) => JSON.parse(fs.readFileSync(path.join(SCHEMAS, f), "utf8"));

const ajv = addFormats(new Ajv2020({ strict: true, discriminator: true, allErrors: true }));
const body = {
  [PREFIX + "blackjack.events"]: ajv.compile(read("event-envelope.json")),
  [PREFIX + "blackjack.command-results"]: ajv.compile(read("command-result.json")),
  [PREFIX + "blackjack.commands"]: ajv.compile(read("command-envelope.json")),
};
const api = read("asyncapi.json");
const ajv07 = addFormats(new Ajv07({ strict: true, allErrors: true }));
const message = (name) => {
  const m = api.components.messages[name];
  return { headers: ajv07.compile(m.headers), key: ajv07.compile(m.bindings.kafka.key) };
};
const channel = {
  [PREFIX + "blackjack.events"]: () => message("events:Message"),
  [PREFIX + "blackjack.command-results"]: () => message("command-results:Message"),
  // the service's own money steps are signed; a platform's commands are not
  [PREFIX + "blackjack.commands"]: (h) => message(h.bj_signature ? "service-commands:Message" : "commands:SubscribeMessage"),
};

const unsafe = (v, at = "") =>
  typeof v === "number" ? (Number.isSafeInteger(v) || !Number.isInteger(v) ? [] : [at])
  : v && typeof v === "object" ? Object.entries(v).flatMap(([k, x]) => unsafe(x, `${at}/${k}`)) : [];
const problems = (validate) => (validate.errors || []).map((e) => `${e.instancePath} ${e.message}`).join("; ");

const counts = {};
const failures = [];
function check(topic, partition, record) {
  const where = `${topic}[${partition}]@${record.offset}`;
  const headers = Object.fromEntries(Object.entries(record.headers || {}).map(([k, v]) => [k, v.toString("utf8")]));
  const key = record.key === null ? null : record.key.toString("utf8"); // a keyless command's result: ""
  let value;
  try { value = JSON.parse(record.value.toString("utf8")); } catch { return failures.push(`${where}: not JSON`); }
  counts[topic] = (counts[topic] || 0) + 1;
  if (!body[topic](value)) failures.push(`${where}: body: ${problems(body[topic])}`);
  const m = channel[topic](headers);
  if (!m.headers(headers)) failures.push(`${where}: headers: ${problems(m.headers)}`);
  if (!m.key(key)) failures.push(`${where}: key ${JSON.stringify(key)}: ${problems(m.key)}`);
  for (const at of unsafe(value)) failures.push(`${where}: ${at} is past 2^53: read it with a parser that keeps integers exact`);
}

(async () => {
  const kafka = new Kafka({ clientId: "blackjack-contract-check", brokers: (process.env.KAFKA_BOOTSTRAP || "127.0.0.1:9092").split(","), logLevel: logLevel.WARN });
  const consumer = kafka.consumer({ groupId: `blackjack-contract-check-${process.pid}-${Date.now()}`, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topics: Object.keys(body), fromBeginning: true });
  let last = Date.now();
  await consumer.run({ eachMessage: async ({ topic, partition, message: record }) => { last = Date.now(); check(topic, partition, record); } });
  while (Date.now() - last < IDLE_MS) await new Promise((r) => setTimeout(r, 250));
  await consumer.disconnect();
  console.log(JSON.stringify({ records: counts, failures: failures.length }));
  for (const f of failures.slice(0, 50)) console.log(f);
  process.exit(failures.length ? 1 : 0);
})();
