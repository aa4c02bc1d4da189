// Preloaded (NODE_OPTIONS=--require) into every Node process of a project's deploy by
// `workerd-operator deploy`. In a wrangler process only, it turns `wrangler deploy` into
// `wrangler deploy --dry-run --outdir $WORKERD_OPERATOR_OUTDIR` (plus `--env` when asked
// and no build tool generated the configuration), appends where and how wrangler ran to
// $WORKERD_OPERATOR_RECORD, and skips `wrangler d1 migrations apply --remote` (the
// D1Database applies the migrations). Every other process is left as it is.
'use strict';
const fs = require('fs');
const path = require('path');

const script = process.argv[1] || '';
// wrangler's bin (node_modules/.bin/wrangler, wrangler/bin/wrangler.js) and the CLI it
// spawns (wrangler/wrangler-dist/cli.js), however the project's script calls it.
const wrangler = /[\\/]\.bin[\\/]wrangler$/.test(script) ||
  /[\\/]wrangler[\\/](bin[\\/]wrangler\.js|wrangler-dist[\\/]cli\.js)$/.test(script);

// wrangler's flags that take a value: the global ones (https://developers.cloudflare.com/workers/wrangler/commands/#global-flags) and deploy's --dispatch-namespace.
const valueFlags = new Set(['--config', '-c', '--env', '-e', '--cwd', '--env-file', '--dispatch-namespace', '--containers-rollout']);

function positional(args) {
  const out = [];
  for (let i = 0; i < args.length; i++) {
    if (!args[i].startsWith('-')) {
      out.push(args[i]);
    } else if (valueFlags.has(args[i])) {
      i++;
    }
  }
  return out;
}

function withoutFlag(args, names) {
  const out = [];
  for (let i = 0; i < args.length; i++) {
    const [name] = args[i].split('=', 1);
    if (names.includes(name)) {
      if (!args[i].includes('=')) i++;
      continue;
    }
    out.push(args[i]);
  }
  return out;
}

if (wrangler && process.env.WORKERD_OPERATOR_RECORD) {
  let args = process.argv.slice(2);
  const cmd = positional(args);
  if (cmd[0] === 'deploy') {
    if (!args.includes('--dry-run')) {
      args = withoutFlag(args, ['--outdir']);
      args.push('--dry-run', '--outdir', process.env.WORKERD_OPERATOR_OUTDIR);
      // Set for a project with containers: the cluster runs images already built
      // (--container-image), and wrangler must not build their Dockerfiles with Docker.
      // Only then: wrangler 3 and early 4 do not know the flag or its value none.
      const rollout = process.env.WORKERD_OPERATOR_CONTAINERS_ROLLOUT;
      if (rollout) {
        args = withoutFlag(args, ['--containers-rollout']);
        args.push('--containers-rollout=' + rollout);
      }
      const env = process.env.WORKERD_OPERATOR_ENV;
      const generated = fs.existsSync(path.join(process.cwd(), '.wrangler', 'deploy', 'config.json'));
      if (env && !generated && !args.some((a) => /^(--env|-e)(=|$)/.test(a))) {
        args.push('--env', env);
      }
      process.argv.splice(2, process.argv.length - 2, ...args);
    }
    fs.appendFileSync(process.env.WORKERD_OPERATOR_RECORD, JSON.stringify({ cwd: process.cwd(), args }) + '\n');
  } else if (cmd[0] === 'd1' && cmd[1] === 'migrations' && cmd[2] === 'apply' && args.includes('--remote')) {
    process.stderr.write('workerd-operator deploy: skipped `wrangler ' + args.join(' ') +
      '`: the D1Database applies the migrations (docs/d1.md)\n');
    process.exit(0);
  }
}
