/** multiloop/no-floating-coroutine, run by ESLint with typed linting on test/fixtures/floating-coroutine.ts. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, expect, it } from 'vitest';
import multiloop from '../src/eslint-plugin.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/floating-coroutine.ts', import.meta.url));

describe('multiloop/no-floating-coroutine', () => {
  it('reports a coroutine made and dropped, and nothing awaited, run as a task, kept or voided', async () => {
    const eslint = new ESLint({
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      ignore: false,
      overrideConfigFile: true,
      overrideConfig: [
        {
          files: ['**/*.ts'],
          languageOptions: { parser: tseslint.parser, parserOptions: { project: ['./tsconfig.test.json'] } },
          plugins: { multiloop },
          rules: { 'multiloop/no-floating-coroutine': 'error' },
        },
      ],
    });
    const [result] = await eslint.lintFiles([FIXTURE]);
    const expected = readFileSync(FIXTURE, 'utf8')
      .split('\n')
      .flatMap((line, index) => (line.includes('// reported') ? [index + 1] : []));
    expect(result!.messages.map((message) => message.line)).toEqual(expected);
    expect(result!.messages[0]!.message).toBe(
      'fetchUser() makes a coroutine that nothing runs: await it with yield*, or run it with createTask(); as a statement it does nothing',
    );
    expect(result!.messages[1]!.message).toMatch(/^load\(\) makes a coroutine/);
  }, 30_000);
});
