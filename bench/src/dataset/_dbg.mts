import { DatasetClickHouse } from './server.ts';
const ch = await DatasetClickHouse.start(process.argv[2]!);
console.log(JSON.stringify({ url: ch.url, pid: ch.pid, ql: ch.queryLog }));
process.on('SIGTERM', async () => { await ch.stop(); process.exit(0); });
setInterval(() => {}, 1 << 30);
