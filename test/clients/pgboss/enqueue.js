// Drives pg-boss for flexiq-scaled's end-to-end tests, through pg-boss's own
// API, so that the jobs are exactly what pg-boss writes.
//   node enqueue.js URL SCHEMA migrate
//   node enqueue.js URL SCHEMA send QUEUE N [START_AFTER_SECONDS]
//   node enqueue.js URL SCHEMA fetch QUEUE N     (N jobs become active: running)
const PgBoss = require('pg-boss');

async function main() {
  const [url, schema, cmd, queue, n, after] = process.argv.slice(2);
  const boss = new PgBoss({ connectionString: url, schema, supervise: false, schedule: false });
  boss.on('error', (err) => console.error(err));
  await boss.start();
  try {
    if (cmd === 'migrate') return;
    await boss.createQueue(queue);
    if (cmd === 'send') {
      for (let i = 0; i < Number(n); i++) {
        await boss.send(queue, { i }, after ? { startAfter: Number(after) } : {});
      }
    } else if (cmd === 'fetch') {
      const jobs = await boss.fetch(queue, { batchSize: Number(n) });
      if (!jobs || jobs.length !== Number(n)) throw new Error(`fetched ${jobs ? jobs.length : 0} jobs, want ${n}`);
    } else {
      throw new Error(`unknown command ${cmd}`);
    }
  } finally {
    await boss.stop({ graceful: false, wait: true });
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
