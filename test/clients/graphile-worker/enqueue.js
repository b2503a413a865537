// Drives graphile-worker for flexiq-scaled's end-to-end tests, through
// graphile-worker's own WorkerUtils, so that its schema comes from its own
// migrations and the jobs are exactly what add_job writes.
//   node enqueue.js URL SCHEMA migrate
//   node enqueue.js URL SCHEMA add QUEUE|- N [RUN_IN_SECONDS]   (- : no job queue)
const { makeWorkerUtils } = require('graphile-worker');

async function main() {
  const [url, schema, cmd, queue, n, runIn] = process.argv.slice(2);
  const utils = await makeWorkerUtils({ connectionString: url, schema });
  try {
    await utils.migrate();
    if (cmd === 'migrate') return;
    if (cmd !== 'add') throw new Error(`unknown command ${cmd}`);
    const spec = {};
    if (queue !== '-') spec.queueName = queue;
    if (runIn) spec.runAt = new Date(Date.now() + Number(runIn) * 1000);
    for (let i = 0; i < Number(n); i++) {
      await utils.addJob('work', { i }, spec);
    }
  } finally {
    await utils.release();
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
