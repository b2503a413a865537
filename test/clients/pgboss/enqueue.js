// Drives pg-boss for flexiq-scaled's end-to-end tests, through pg-boss's own
// API, so that its schema comes from its own migrations and the jobs are
// exactly what pg-boss writes. One process runs every operation given, in
// order (node's start is the slow part):
//   node enqueue.js URL SCHEMA [OP...]
// where OP is
//   send,QUEUE,N[,START_AFTER_SECONDS]   N jobs, due after that many seconds (negative: in the past)
//   fetch,QUEUE,N                         N jobs become active: running
// With no OP it only installs the schema.
const PgBoss = require('pg-boss');

async function main() {
  const [url, schema, ...ops] = process.argv.slice(2);
  const boss = new PgBoss({ connectionString: url, schema, supervise: false, schedule: false });
  boss.on('error', (err) => console.error(err));
  await boss.start();
  try {
    for (const op of ops) {
      const [cmd, queue, n, after] = op.split(',');
      await boss.createQueue(queue);
      if (cmd === 'send') {
        const options = after ? { startAfter: new Date(Date.now() + Number(after) * 1000) } : {};
        for (let i = 0; i < Number(n); i++) await boss.send(queue, { i }, options);
      } else if (cmd === 'fetch') {
        const jobs = await boss.fetch(queue, { batchSize: Number(n) });
        if (!jobs || jobs.length !== Number(n)) throw new Error(`fetched ${jobs ? jobs.length : 0} jobs, want ${n}`);
      } else {
        throw new Error(`unknown operation ${op}`);
      }
    }
  } finally {
    await boss.stop({ graceful: false, wait: true });
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
