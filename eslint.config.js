// The lint step of `npm test`: the rules a careful TypeScript library keeps, with type
// information (tsconfig.test.json covers src, test, bench, examples and workers).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import multiloop from './dist/src/eslint-plugin.js';

export default tseslint.config(
  { ignores: ['dist/**', 'docs/**', 'node_modules/**', 'test/fixtures/**/*.mjs', 'test/fixtures/**/*.cts', '**/*.d.mts', '*.config.*', 'test/fixtures/floating-coroutine.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.mts'],
    languageOptions: {
      parserOptions: { project: ['./tsconfig.test.json'], tsconfigRootDir: import.meta.dirname },
    },
    plugins: { multiloop },
    rules: {
      // A coroutine made and dropped never runs (the build's own rule: npm test builds first).
      'multiloop/no-floating-coroutine': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // `typeof import('./svc.js')` types a LoopThread's proxy: type annotations with import() stay allowed.
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false }],
      // A coroutine that never waits is a generator function without yield, and a valid one.
      'require-yield': 'off',
    },
  },
  {
    // The scheduling methods read `arguments` to avoid a rest array per call (see bench/core.ts).
    files: ['src/base-events.ts'],
    rules: { 'prefer-rest-params': 'off' },
  },
  {
    // Plain Node scripts that run before the build (scripts/system-deps.mjs).
    files: ['scripts/**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
  {
    // Tests throw from finally blocks on purpose: that is what they check.
    files: ['test/**/*.ts'],
    rules: { 'no-unsafe-finally': 'off' },
  },
);
