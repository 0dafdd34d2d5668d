/** `npm run migrate`: applies migrations/ to the store named by the environment (env.ts). */
import { migrate } from '@sightline/store';
import { storeFromEnv } from '@sightline/store';

const store = await storeFromEnv();
try {
  const r = await migrate(store);
  console.log(`${store.kind} database ${store.database}: applied ${r.applied.length} (${r.applied.join(', ') || 'none'}), already applied ${r.skipped.length}`);
} finally {
  await store.close();
}
