import { afterAll, expect, test } from 'vitest';
import { cleanupAll, runCliJson, startServer } from './support/processes.js';

afterAll(() => cleanupAll());

test('nothing the server writes (at debug level) contains an API key or a password', async () => {
  const server = await startServer({ env: { LOG_LEVEL: 'trace' } });
  const password = 'a password that must not leak';
  const company = await runCliJson(['company', 'create', '--name', 'Leak check', '--json'], server.cliEnv);
  const companyId = company.json.id as string;
  await runCliJson(
    ['user', 'create', '--company', companyId, '--email', 'leak@check.test', '--password', password, '--json'],
    server.cliEnv,
  );
  const integration = await runCliJson(['integration', 'create', '--company', companyId, '--name', 'L', '--json'], server.cliEnv);
  const { id, integration_key: integrationKey, api_key: apiKey } = integration.json as Record<string, string>;
  const rotated = await runCliJson(['key', 'rotate', '--integration', id!, '--grace', '0', '--json'], server.cliEnv);
  const newKey = rotated.json.api_key as string;
  const management = await runCliJson(['key', 'create', '--company', companyId, '--json'], server.cliEnv);
  const secrets = [password, apiKey!, newKey, management.json.api_key as string];

  const post = (key: string, body: string, contentType = 'application/json') =>
    fetch(server.url(`/api/webhooks/${integrationKey}`), {
      method: 'POST',
      headers: { 'content-type': contentType, 'x-api-key': key },
      body,
    });
  // Accepted, expired, wrong scope, and refused bodies: every path that could log a header.
  expect((await post(newKey, '{"event":"ok"}')).status).toBe(202);
  expect((await post(apiKey!, '{"event":"old"}')).status).toBe(401);
  expect((await post(management.json.api_key as string, '{"event":"mgmt"}')).status).toBe(403);
  expect((await post(newKey, '{"event":', 'application/json')).status).toBe(400);
  expect((await post(newKey, 'plain', 'text/plain')).status).toBe(415);
  expect((await fetch(server.url(`/nowhere?key=${newKey}`), { headers: { 'x-api-key': newKey } })).status).toBe(404);

  await server.stop(30_000);
  const output = server.stdout + server.stderr;
  expect(output.length).toBeGreaterThan(0);
  for (const secret of secrets) expect(output).not.toContain(secret);
});
