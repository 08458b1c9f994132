/**
 * Worker threads for the grep tool (grep-worker.ts): at most `max` searches run at once (others
 * wait their turn), each in a worker of its own. The event loop only posts a job and awaits its
 * answer. A search that overruns its deadline stops itself between files; one that still has not
 * answered a grace period later (a huge file being read) has its worker terminated, as does one
 * whose turn is interrupted. Idle workers are kept briefly for the next search, then closed.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { GrepJob, GrepOutcome } from "./grep-worker.js";

/** How long a worker stays after its search, for the next one. */
const IDLE_MS = 30_000;
/** How long past its deadline a search may take to answer before its worker is terminated. */
const GRACE_MS = 2_000;

/**
 * How to start the worker: the compiled `grep-worker.js` next to this module (dist/), or, when
 * running from the TypeScript sources (tests, tsx), `grep-worker.ts` behind tsx's loader,
 * registered inside the worker (module hooks are per thread).
 */
function startWorker(): Worker {
  const js = new URL("./grep-worker.js", import.meta.url);
  if (existsSync(fileURLToPath(js))) return new Worker(js);
  const ts = new URL("./grep-worker.ts", import.meta.url);
  for (let dir = path.dirname(fileURLToPath(ts)); ; dir = path.dirname(dir)) {
    const api = path.join(dir, "node_modules", "tsx", "dist", "esm", "api", "index.mjs");
    if (existsSync(api)) {
      const boot = `import(${JSON.stringify(pathToFileURL(api).href)}).then((m) => { m.register(); return import(${JSON.stringify(ts.href)}); });`;
      return new Worker(boot, { eval: true });
    }
    if (path.dirname(dir) === dir) throw new Error("the grep worker is missing (neither grep-worker.js nor tsx to run grep-worker.ts)");
  }
}

interface Idle {
  worker: Worker;
  timer: NodeJS.Timeout;
}

export class GrepPool {
  private readonly idle: Idle[] = [];
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly max = 2) {}

  /** Runs a search; resolves with its outcome (never rejects). */
  async run(job: GrepJob, signal: AbortSignal): Promise<GrepOutcome | { ok: false; error: string; aborted?: boolean }> {
    if (this.running >= this.max) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.running++;
    try {
      if (signal.aborted) return { ok: false, error: "The search was interrupted.", aborted: true };
      return await this.runOn(this.take(), job, signal);
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }

  private take(): Worker {
    const idle = this.idle.pop();
    if (idle) {
      clearTimeout(idle.timer);
      return idle.worker;
    }
    const worker = startWorker();
    worker.unref(); // an idle (or searching) worker never keeps the process alive
    return worker;
  }

  private release(worker: Worker): void {
    const entry: Idle = { worker, timer: setTimeout(() => this.close(entry), IDLE_MS).unref() };
    this.idle.push(entry);
  }

  private close(entry: Idle): void {
    const i = this.idle.indexOf(entry);
    if (i >= 0) this.idle.splice(i, 1);
    void entry.worker.terminate();
  }

  private runOn(worker: Worker, job: GrepJob, signal: AbortSignal): Promise<GrepOutcome | { ok: false; error: string; aborted?: boolean }> {
    const budgetS = Math.round(Math.max(0, job.deadline - Date.now()) / 1000);
    return new Promise((resolve) => {
      let done = false;
      const finish = (outcome: GrepOutcome | { ok: false; error: string; aborted?: boolean }, reuse: boolean) => {
        if (done) return;
        done = true;
        clearTimeout(hard);
        signal.removeEventListener("abort", onAbort);
        worker.off("message", onMessage);
        worker.off("error", onError);
        worker.off("exit", onExit);
        if (reuse) this.release(worker);
        else void worker.terminate();
        resolve(outcome);
      };
      const onMessage = (outcome: GrepOutcome) => finish(outcome, true);
      const onError = (err: Error) => finish({ ok: false, error: `grep failed: ${err.message}.` }, false);
      const onExit = (code: number) => finish({ ok: false, error: `grep failed: its worker exited (${code}).` }, false);
      const onAbort = () => finish({ ok: false, error: "The search was interrupted.", aborted: true }, false);
      const hard = setTimeout(
        () => finish({ ok: false, error: `The search did not finish within ${budgetS} s and was stopped; narrow the path or glob.` }, false),
        Math.max(0, job.deadline - Date.now()) + GRACE_MS,
      );
      worker.on("message", onMessage);
      worker.on("error", onError);
      worker.on("exit", onExit);
      signal.addEventListener("abort", onAbort, { once: true });
      worker.postMessage(job);
    });
  }
}

/** The server's pool (grep calls of every thread share it). */
export const grepPool = new GrepPool();
