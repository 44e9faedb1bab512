// driver.mjs runs one conformance scenario against an ACP agent with the
// official ACP client library, and prints what the client saw as JSON:
// every session/update and every response, in arrival order.
//
//   node driver.mjs INPUT_JSON CWD -- AGENT_COMMAND [ARGS...]
//
// The agent's stderr passes through; its stdout is the protocol stream.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const args = process.argv.slice(2);
const sep = args.indexOf("--");
if (sep !== 2 || args.length < 4) {
  console.error("usage: node driver.mjs INPUT_JSON CWD -- AGENT_COMMAND [ARGS...]");
  process.exit(2);
}
const [inputPath, cwd] = args;
const agentCmd = args.slice(3);
const input = JSON.parse(readFileSync(inputPath, "utf8"));

// The agent starts in CWD, as the reference's snapshot harness starts it
// in the scenario's workspace, unless DSH_ACP_START_DIR names another
// directory: then it starts there, with PWD pointing there too, as an
// editor starts an agent from wherever the editor itself runs.
const startDir = process.env.DSH_ACP_START_DIR || cwd;
const child = spawn(agentCmd[0], agentCmd.slice(1), { cwd: startDir, env: { ...process.env, PWD: startDir }, stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

const transcript = [];
let onMessageChunk = null;

// A permission request (a hook that asks before a tool runs) is answered
// with the reject option, or with "allow" when DSH_ACP_PERMISSION=allow;
// the transcript records it.
const permission = process.env.DSH_ACP_PERMISSION === "allow" ? "allow" : "reject";

const app = acp.client({ name: "dsh-wasm-conformance-driver" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    transcript.push({ type: "permission", request: params });
    const option = params.options.find((o) => o.kind.startsWith(permission));
    if (!option) return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    transcript.push({ type: "update", update: params.update });
    if (params.update.sessionUpdate === "agent_message_chunk" && onMessageChunk) {
      const f = onMessageChunk;
      onMessageChunk = null;
      f();
    }
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

function errorOf(e) {
  return { code: e?.code ?? null, message: String(e?.message ?? e) };
}

await app.connectWith(stream, async (ctx) => {
  let sessionId = null;
  for (const step of input.steps) {
    const record = (body) => transcript.push({ type: "response", op: step.op, ...body });
    try {
      switch (step.op) {
        case "initialize": {
          const clientCapabilities = step.terminalOutput ? { _meta: { terminal_output: true } } : {};
          record({ result: await ctx.request("initialize", { protocolVersion: 1, clientCapabilities }) });
          break;
        }
        case "newSession": {
          const r = await ctx.request("session/new", { cwd, mcpServers: [] });
          sessionId = r.sessionId;
          record({ result: r });
          break;
        }
        case "newSessionExpectError": {
          const r = await ctx.request("session/new", { cwd, mcpServers: [], additionalDirectories: step.additionalDirectories });
          record({ result: r });
          break;
        }
        case "prompt": {
          const r = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: step.text }] });
          record({ result: r });
          break;
        }
        case "promptAndCancel": {
          const first = new Promise((resolve) => { onMessageChunk = resolve; });
          const p = ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: step.text }] });
          await first;
          await ctx.notify("session/cancel", { sessionId });
          record({ result: await p });
          break;
        }
        case "cancel":
          await ctx.notify("session/cancel", { sessionId });
          break;
        default:
          throw new Error(`unknown op ${step.op}`);
      }
    } catch (e) {
      record({ error: errorOf(e) });
    }
  }
});

child.stdin.end();
const status = await exited;
process.stdout.write(JSON.stringify({ transcript, exit: status }) + "\n");
