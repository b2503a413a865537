// Drives graphile-worker for flexiq-scaled's end-to-end tests, through
// graphile-worker's own WorkerUtils, so that its schema comes from its own
// migrations and the jobs are exactly what add_job writes. One process runs
// every operation given, in order (node's start is the slow part):
//   node enqueue.js URL SCHEMA [OP...]
// where OP is
//   add,QUEUE,N[,RUN_IN_SECONDS]   N jobs of task "work" (QUEUE - : no job queue), due then (negative: in the past)
//   take,QUEUE,N                   N due jobs, then locked as get_job locks the job a worker takes: running
// With no OP it only installs the schema. With FLEXIQ_MARK set, it prints
// flexiq-mark-usec=CLOCK_MONOTONIC in µs just before the first operation
// (the benchmark's start: node's start and the migration check are not the
// queue's latency), and flexiq-done-usec after the last.
const { makeWorkerUtils } = require('graphile-worker');

async function main() {
  const [url, schema, ...ops] = process.argv.slice(2);
  const utils = await makeWorkerUtils({ connectionString: url, schema });
  try {
    await utils.migrate();
    if (process.env.FLEXIQ_MARK) {
      // process.hrtime is libuv's uv_hrtime: CLOCK_MONOTONIC on Linux.
      console.log(`flexiq-mark-usec=${process.hrtime.bigint() / 1000n}`);
    }
    for (const op of ops) {
      const [cmd, queue, n, runIn] = op.split(',');
      const spec = {};
      if (queue !== '-') spec.queueName = queue;
      if (runIn) spec.runAt = new Date(Date.now() + Number(runIn) * 1000);
      const ids = [];
      for (let i = 0; i < Number(n); i++) ids.push((await utils.addJob('work', { i }, spec)).id);
      if (cmd === 'take') {
        // What get_job does to the job it hands a worker (src/sql/getJob.ts).
        await utils.withPgClient((client) => client.query(
          `UPDATE "${schema}"._private_jobs SET locked_at = now(), locked_by = 'test-worker-1', attempts = attempts + 1 WHERE id = ANY($1::bigint[])`,
          [ids]));
      } else if (cmd !== 'add') {
        throw new Error(`unknown operation ${op}`);
      }
    }
    if (process.env.FLEXIQ_MARK) console.log(`flexiq-done-usec=${process.hrtime.bigint() / 1000n}`);
  } finally {
    await utils.release();
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
