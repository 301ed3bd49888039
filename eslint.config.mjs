// The browser components' code (ui/widgets/frontend/): ES modules that Streamlit loads into the
// app's page. `make lint` runs eslint with this configuration.
import js from '@eslint/js';
import globals from 'globals';

export default [
  { ignores: ['.venv/', 'artifacts/', 'benchmarks/results/'] },
  js.configs.recommended,
  {
    files: ['ui/widgets/frontend/**/*.js'],
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: globals.browser },
    rules: {
      eqeqeq: 'error',
      'no-var': 'error',
      'prefer-const': 'error',
      'no-implicit-globals': 'error',
      'no-shadow': 'error',
      'no-unused-vars': ['error', { args: 'all' }],
    },
  },
  {
    files: ['eslint.config.mjs'],
    languageOptions: { sourceType: 'module', globals: globals.node },
  },
];
