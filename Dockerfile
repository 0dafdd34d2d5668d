# One image for the three Sightline apps; docker-compose.yml picks the app with `command`:
#   node [--single-threaded-gc, the gateway] --conditions=production apps/{gateway,ingester,query}/dist/main.js
# Compiled JavaScript and production dependencies only, run as the unprivileged `node` user.
# test/compose.test.ts builds the same JavaScript (`npm run build`) and starts the apps with
# these command lines against real NATS and ClickHouse servers.
ARG NODE_IMAGE=node:20-bookworm-slim

# --- build: every dependency (TypeScript included), then `tsc -b` into each workspace's dist/
# (and the dashboard's static files, public/, which need no build).
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json tsconfig.base.json ./
COPY packages ./packages
COPY apps ./apps
# Optional packages are the in-process ClickHouse engine's ~550 MB library (chdb, for the
# one-machine setup only) and esbuild's binary (tsx, for running TypeScript in development):
# neither is needed to compile. No install script is needed either (chdb's is a no-op).
RUN npm ci --omit=optional --ignore-scripts --no-audit --no-fund
RUN npm run build \
 && mkdir /out \
 && for d in packages/* apps/*; do \
      mkdir -p "/out/$d" && cp "$d/package.json" "/out/$d/" && cp -R "$d/dist" "/out/$d/dist" \
      && if [ -d "$d/public" ]; then cp -R "$d/public" "/out/$d/public"; fi; \
    done \
 && find /out \( -name '*.d.ts' -o -name '*.tsbuildinfo' \) -delete

# --- runtime: package manifests, compiled output, production dependencies.
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY --from=build /out ./
# Workspaces resolve through their package.json "exports"; the "production" condition on the
# command line points them at dist/index.js instead of the TypeScript source (not in the image).
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
COPY config ./config
COPY migrations ./migrations
# Local state: the gateway's capture spool and the key directory's snapshot
# (SIGHTLINE_DATA_DIR defaults to ./data); mount a volume here. Code stays owned by root.
RUN mkdir -p /app/data/spool && chown -R node:node /app/data
USER node
EXPOSE 8080 8081 8082
CMD ["node", "--single-threaded-gc", "--conditions=production", "apps/gateway/dist/main.js"]
