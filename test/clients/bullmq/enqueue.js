// Drives a BullMQ queue with BullMQ's own client, for the bullmq source's
// e2e test: node enqueue.js URL QUEUE COMMAND [N] [ARG]
//   add N          N ready jobs
//   prioritized N  N ready jobs with a priority
//   delayed N MS   N jobs delayed by MS milliseconds
//   pause | resume the queue
//   obliterate     remove the queue and all its jobs
// With FLEXIQ_MARK set, it prints flexiq-mark-usec=CLOCK_MONOTONIC in µs
// once connected, just before it enqueues (the benchmark's start: node's
// own start is not the queue's latency), and flexiq-done-usec after.
'use strict';
const { Queue } = require('bullmq');

async function main() {
  const [url, name, cmd, n = '0', arg = '0'] = process.argv.slice(2);
  const u = new URL(url);
  const queue = new Queue(name, {
    connection: { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: 1 },
  });
  try {
    if (process.env.FLEXIQ_MARK) {
      await queue.waitUntilReady();
      // process.hrtime is libuv's uv_hrtime: CLOCK_MONOTONIC on Linux.
      console.log(`flexiq-mark-usec=${process.hrtime.bigint() / 1000n}`);
    }
    const jobs = (opts) => Array.from({ length: Number(n) }, (_, i) => ({ name: 'job', data: { i }, opts }));
    switch (cmd) {
      case 'add': await queue.addBulk(jobs({})); break;
      case 'prioritized': await queue.addBulk(jobs({ priority: 5 })); break;
      case 'delayed': await queue.addBulk(jobs({ delay: Number(arg) })); break;
      case 'pause': await queue.pause(); break;
      case 'resume': await queue.resume(); break;
      case 'obliterate': await queue.obliterate({ force: true }); break;
      default: throw new Error(`unknown command ${cmd}`);
    }
    if (process.env.FLEXIQ_MARK) console.log(`flexiq-done-usec=${process.hrtime.bigint() / 1000n}`);
  } finally {
    await queue.close();
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
