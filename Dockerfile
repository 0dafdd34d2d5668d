# One image for the three Sightline apps; docker-compose.yml picks the app with `command`.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json tsconfig.json tsconfig.base.json ./
COPY packages ./packages
COPY apps ./apps
# The in-process ClickHouse engine (chdb, an optional ~550 MB library) is only for the
# one-machine setup; the containers use the ClickHouse server, so it is left out.
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund && npm cache clean --force
COPY config ./config
COPY migrations ./migrations
# The capture spool (batches waiting for NATS) lives here; mount a volume on it.
RUN mkdir -p /app/data/spool && chown -R node:node /app/data
USER node
EXPOSE 8080 8081 8082
CMD ["node", "--import", "tsx", "apps/gateway/src/main.ts"]
