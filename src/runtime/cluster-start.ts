/**
 * Wires leases, the sweeper, fan-out and remote commands into a server (issue 12). PGlite is one
 * process by construction (its directory is locked): it gets leases and the sweeper (the same SQL,
 * so start-up recovery is one code path) but no LISTEN/NOTIFY.
 */
import { randomUUID } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Database } from "../store/database.js";
import { lockDirectory } from "../store/dir-lock.js";
import { LeaseStore } from "../store/lease-store.js";
import { PgNotifyChannel } from "../store/notify-channel.js";
import { RecoveryStore } from "../store/recovery-store.js";
import { ClusterLinks } from "./cluster.js";
import { Fanout } from "./fanout.js";
import { leaseTtlFromEnv, positiveSetting } from "./lease-ttl.js";
import { LeaseManager } from "./leases.js";
import { RemoteCommands } from "./remote-commands.js";
import { Sweeper } from "./sweeper.js";
import type { RuntimeLogger } from "./thread-types.js";
import type { ThreadRuntime } from "./threads.js";
import type { TurnRunner } from "./turns.js";

export interface ClusterHandle {
  links: ClusterLinks;
  stopSweeping(): void;
  close(): Promise<void>;
}

interface Logger extends RuntimeLogger {
  child(bindings: object): Logger;
}

/**
 * The home directory's node id: a process restarted on the same home expires its predecessor's
 * registration at once (its turns are recovered at start, not after the TTL). Only while this
 * process holds the home's lock: two live processes sharing a home must not expire each other.
 */
async function nodeIdOf(home: string): Promise<{ id: string | null; unlock: () => void }> {
  let unlock: () => void;
  try {
    unlock = lockDirectory(home);
  } catch {
    return { id: null, unlock: () => {} };
  }
  const file = path.join(home, "node-id");
  // No file yet (the first start), or one that cannot be read: a new id, written below (writeFile throws if that fails too).
  let id = (await readFile(file, "utf8").catch(() => "")).trim();
  if (!id) {
    id = randomUUID();
    await writeFile(file, id, { mode: 0o600 });
  }
  return { id, unlock };
}

export async function startCluster(opts: { db: Database; home: string; runtime: ThreadRuntime; turns: TurnRunner; log: Logger; env: NodeJS.ProcessEnv; processId?: string }): Promise<ClusterHandle> {
  const { db, runtime, turns } = opts;
  const log = opts.log.child({ component: "cluster" });
  const ttlMs = leaseTtlFromEnv(opts.env);
  const sweepMs = positiveSetting(opts.env.APP_SERVER_SWEEP_INTERVAL_MS, Math.min(5000, Math.max(100, Math.floor(ttlMs / 2))));
  const relayMs = positiveSetting(opts.env.APP_SERVER_RELAY_INTERVAL_MS, 20);
  const node = await nodeIdOf(opts.home);
  const leases = new LeaseManager(new LeaseStore(db.sql), { ttlMs, nodeId: node.id, ...(opts.processId ? { processId: opts.processId } : {}) }, log);
  const links = new ClusterLinks(leases, runtime, log);
  links.turns = turns;
  runtime.cluster = links;
  if (db.kind === "postgres") {
    const channel = new PgNotifyChannel(db.sql);
    links.fanout = new Fanout(channel, leases.processId, log, (m) => links.onMessage(m), (t) => links.onListen(t), relayMs);
    links.commands = new RemoteCommands(channel, leases.processId, (c) => links.handle(c), log);
    await links.commands.start();
    await links.fanout.listenPresence();
  }
  await leases.start();
  const fanout = links.fanout;
  if (fanout) {
    fanout.onPeerFound = () => runtime.releaseIdleLeases();
    // A process that missed this one's hello (its link was down) keeps idle leases: ask it.
    leases.onIdleHeld = (threadId) =>
      void leases
        .liveOwner(threadId)
        .then((owner) => owner && links.commands?.send(owner, { kind: "release", threadId }))
        .catch((err) => log.info({ err: (err as Error).message, threadId }, "the owner of an idle thread did not answer a request for its lease"));
    // Serve only once every running process relays to this one (see fanout.ts, presence).
    await fanout.join(await leases.store.liveOthers(leases.processId), Math.min(2000, ttlMs));
    leases.afterBeat = async (afterGap) => {
      if (afterGap) {
        // Others may have taken this process for dead and its threads with it: the leases kept
        // between turns are given back (a no-op where they were taken) and taken again on use.
        runtime.releaseIdleLeases();
        // Our registration may have expired meanwhile, and others stopped relaying to us: join
        // again (relays resume once they answer), then read what followed threads committed
        // while no wake-up came.
        await fanout.join(await leases.store.liveOthers(leases.processId), Math.min(2000, ttlMs));
        links.catchUpFollowed();
      }
      const since = fanout.hellosHeard;
      fanout.peersSeen((await leases.store.liveOthers(leases.processId)).length, since, leases.judgesOthers());
      await links.reconcileFollowed();
    };
  }
  const sweeper = new Sweeper(runtime, leases, new RecoveryStore(runtime.store, leases.store), (r, epoch) => turns.restore(r, epoch), log);
  await sweeper.sweep();
  sweeper.start(sweepMs);
  // Housekeeping only (rows of long-dead processes): a failed run is retried by the next one.
  const forget = setInterval(() => void leases.store.forgetDead().catch((err) => log.warn({ err }, "could not forget dead processes")), 10 * 60_000).unref();
  log.info({ processId: leases.processId, ttlMs, sweepMs }, "registered");
  return {
    links,
    stopSweeping: () => {
      sweeper.stop();
      clearInterval(forget);
    },
    close: async () => {
      await links.fanout?.close();
      await links.commands?.close();
      await leases.stop();
      node.unlock();
    },
  };
}
