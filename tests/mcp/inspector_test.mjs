// Drives `causeway mcp --db TRACE` with the MCP Inspector's CLI (a real MCP
// client over stdio): lists the tools, calls each one, checks the answers
// against the known trace written by causeway_fixture_trace.
import { execFileSync } from "node:child_process";
import { readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";

const [causeway, db, artifacts] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const cliDir = join(here, "node_modules/@modelcontextprotocol/inspector-cli/build");

// inspector-cli 1.0.3 looks for "../package.json" relative to the current
// directory but imports it relative to its own file: run it from its build/
// folder so both resolve to its package.json.
function inspector(...args) {
  const out = execFileSync(
    process.execPath,
    [join(cliDir, "cli.js"), "--cli", causeway, "mcp", "--db", db, ...args],
    { cwd: cliDir, encoding: "utf8", timeout: 60000, stdio: ["ignore", "pipe", "pipe"] },
  );
  return JSON.parse(out.slice(out.indexOf("{")));
}
const log = [];
function call(tool, toolArgs = {}) {
  const args = ["--method", "tools/call", "--tool-name", tool];
  for (const [k, v] of Object.entries(toolArgs)) args.push("--tool-arg", `${k}=${v}`);
  const result = inspector(...args);
  log.push({ tool, toolArgs, result });
  return result;
}
const payload = (r) => {
  assert.ok(!r.isError, JSON.stringify(r));
  return JSON.parse(r.content[0].text);
};

const listed = inspector("--method", "tools/list");
log.push({ method: "tools/list", result: listed });
const names = listed.tools.map((t) => t.name);
assert.deepEqual(names, [
  "check", "trace_stats", "causal_chains", "time_account", "gpu_memory", "stacks", "top_kernels", "nccl_summary", "sql",
]);
for (const t of listed.tools) assert.equal(t.inputSchema.type, "object");

const check = payload(call("check"));
// The newest migration in schema/ (NNN_name.sql) is the version a new trace is written at.
const newest = Math.max(...readdirSync(join(here, "../../schema"))
  .filter((f) => /^\d{3}_.*\.sql$/.test(f)).map((f) => parseInt(f.slice(0, 3), 10)));
assert.equal(check.schema_version, newest);
assert.equal(check.rows.cuda_call_events, 104);
assert.equal(check.sessions[0].host, "testhost");

const stats = payload(call("trace_stats"));
assert.deepEqual(stats.map((s) => s.op),
  ["cudaStreamSynchronize", "cudaMemcpy", "cudaMalloc", "cudaLaunchKernel"]);
assert.equal(stats[2].p95_ns, 9000);
assert.equal(payload(call("trace_stats", { op: "cudaMalloc", pid: 101 }))[0].calls, 1);

const explained = payload(call("causal_chains"));
const contention = explained.chains.find((c) => c.root_cause === "cpu_contention");
assert.ok(contention, JSON.stringify(explained.chains.map((c) => c.root_cause)));
assert.equal(contention.symptom.op, "cudaStreamSynchronize");
assert.equal(contention.symptom.slow_calls, 10);

// pid 300 makes 100 syncs 10 ms apart: 90 of 50 us and 10 of 5 ms (query_fixture.h).
const accounts = payload(call("time_account"));
assert.equal(accounts.length, 1);
assert.equal(accounts[0].name, "trainer");
assert.equal(accounts[0].tid, 300);
assert.equal(accounts[0].syncs, 100);
assert.equal(accounts[0].steps, 99);
assert.equal(accounts[0].time_ns.sync_busy, 90 * 50000 + 10 * 5000000);
assert.equal(accounts[0].time_ns.on_cpu, 990050000 - 54500000);

// The known trace has one cudaMalloc of 512 B (pid 101), no address: nothing to pair.
assert.deepEqual(payload(call("gpu_memory")).map((m) => [m.pid, m.allocations]), []);

const stack = payload(call("stacks", { stack_id: 7 }));
assert.deepEqual(stack.frames.map((f) => `${f.func}:${f.line}`), ["load_batch:42", "main:90"]);
assert.equal(payload(call("stacks", { cuda_call_rowid: 2 })).stack_id, 7);

assert.deepEqual(payload(call("top_kernels", { limit: 5 })), [
  { kernel: "gemm_kernel", launches: 1, total_ns: 3000, max_ns: 3000 },
]);
assert.deepEqual(payload(call("nccl_summary")), []);

const rows = payload(call("sql", { query: "SELECT op, bytes FROM cuda_calls WHERE pid = 101" }));
assert.deepEqual(rows.rows, [{ op: "cudaMalloc", bytes: 512 }]);
const refused = call("sql", { query: "DROP TABLE cuda_call_events" });
assert.equal(refused.isError, true);
assert.match(refused.content[0].text, /^refused: DROP TABLE is not allowed/);

writeFileSync(join(artifacts, "inspector-session.json"), JSON.stringify(log, null, 2));
console.log(`ok: ${names.length} tools listed, ${log.length - 1} calls checked through mcp-inspector-cli`);
