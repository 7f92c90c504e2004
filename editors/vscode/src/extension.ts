// tilelint for VS Code: starts `tilelint server` (stdio) and connects it with
// vscode-languageclient.
//
// Which command runs, first match wins:
//   1. `tilelint.path`         e.g. ["/opt/venv/bin/tilelint"]   -> <path> server <args>
//   2. `tilelint.interpreter`  e.g. ["/opt/venv/bin/python"]     -> <python> -m tilelint.server.cli server <args>
//   3. the interpreter selected in the Python extension (ms-python), if installed
//   4. `tilelint` on the PATH
import * as fs from "fs";
import * as nodePath from "path";
import * as vscode from "vscode";
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";

const SECTION = "tilelint";
let client: LanguageClient | undefined;
let output: vscode.OutputChannel | undefined;
let starting: Promise<void> | undefined;

interface Launch {
  command: string;
  args: string[];
  source: string;
}

async function selectedInterpreter(resource?: vscode.Uri): Promise<string[] | undefined> {
  const ext = vscode.extensions.getExtension("ms-python.python");
  if (!ext) {
    return undefined;
  }
  try {
    // Loaded lazily: the Python extension is optional.
    const { PythonExtension } = await import("@vscode/python-extension");
    const api = await PythonExtension.api();
    const envPath = api.environments.getActiveEnvironmentPath(resource);
    const env = await api.environments.resolveEnvironment(envPath);
    const exe = env?.executable.uri?.fsPath;
    return exe ? [exe] : undefined;
  } catch (err) {
    output?.appendLine(`tilelint: could not ask the Python extension for an interpreter: ${err}`);
    return undefined;
  }
}

async function launchCommand(config: vscode.WorkspaceConfiguration): Promise<Launch> {
  const extra = config.get<string[]>("args", []);
  const path = config.get<string[]>("path", []);
  if (path.length > 0) {
    return {
      command: path[0],
      args: [...path.slice(1), "server", ...extra],
      source: "tilelint.path",
    };
  }
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  let interpreter = config.get<string[]>("interpreter", []);
  let source = "tilelint.interpreter";
  if (interpreter.length === 0) {
    interpreter = (await selectedInterpreter(folder)) ?? [];
    source = "the Python extension's interpreter";
  }
  if (interpreter.length > 0) {
    return {
      command: interpreter[0],
      args: [...interpreter.slice(1), "-m", "tilelint.server.cli", "server", ...extra],
      source,
    };
  }
  return { command: "tilelint", args: ["server", ...extra], source: "PATH" };
}

const CLIENT_ONLY = new Set(["path", "interpreter", "args", "trace"]);

function cleanSettings(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (CLIENT_ONLY.has(key) || v === "" || v === null || v === undefined) {
      continue;
    }
    out[key] = v;
  }
  return out;
}

function settingsForServer(config: vscode.WorkspaceConfiguration): Record<string, unknown> {
  const target = config.get<string>("target", "");
  // Workspace trust: the server refuses compiler verification (which imports
  // the user's file with the real tilelang) when this is false.
  const out: Record<string, unknown> = { trusted: vscode.workspace.isTrusted };
  if (target) {
    out.target = target;
  }
  return out;
}

// The command as the server would be spawned: an existing file for a path, else the
// first match on PATH.  undefined: nothing to run (checked before starting, so that a
// missing command gives one clear message instead of the language client's own error).
function findExecutable(command: string): string | undefined {
  const isFile = (p: string) => {
    try {
      return fs.statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (command.includes("/") || command.includes("\\")) {
    return isFile(command) ? command : undefined;
  }
  const exts = process.platform === "win32" ? ["", ".exe", ".cmd", ".bat"] : [""];
  for (const dir of (process.env.PATH ?? "").split(nodePath.delimiter)) {
    for (const ext of exts) {
      const candidate = nodePath.join(dir, command + ext);
      if (dir && isFile(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

// One message when the server cannot start (the command is checked first, so the
// language client does not add an error of its own).  In Restricted Mode VS Code
// ignores the folder's tilelint.path/tilelint.interpreter (restrictedConfigurations in
// package.json): say so, and that user settings or trusting the folder fix it.
function cannotStart(launch: Launch, err?: unknown): void {
  let msg: string;
  if (!vscode.workspace.isTrusted) {
    msg =
      `tilelint: this folder is in Restricted Mode, so VS Code does not use the folder's own ` +
      `tilelint.path and tilelint.interpreter settings, and "${launch.command}" ` +
      `(from ${launch.source}) could not be started. ` +
      `tilelint only reads the file (it never runs it), so it works here too: set tilelint.path ` +
      `in your user settings, or trust the folder.`;
  } else {
    msg =
      `tilelint: could not start the language server with "${launch.command}" (from ${launch.source}). ` +
      `tilelint is not on PyPI: install it into that environment from a checkout of its repository ` +
      `(pip install /path/to/tilelint) or set tilelint.path.`;
  }
  output?.appendLine(err === undefined ? msg : `${msg}\n${err}`);
  const actions = vscode.workspace.isTrusted ? ["Show Output"] : ["Open User Settings", "Manage Workspace Trust"];
  void vscode.window.showErrorMessage(msg, ...actions).then((choice) => {
    if (choice === "Show Output") {
      output?.show();
    } else if (choice === "Open User Settings") {
      void vscode.commands.executeCommand("workbench.action.openSettings", "tilelint.path");
    } else if (choice === "Manage Workspace Trust") {
      void vscode.commands.executeCommand("workbench.trust.manage");
    }
  });
}

async function start(context: vscode.ExtensionContext): Promise<void> {
  const config = vscode.workspace.getConfiguration(SECTION);
  const launch = await launchCommand(config);
  output?.appendLine(`tilelint: starting ${launch.command} ${launch.args.join(" ")} (from ${launch.source})`);
  if (findExecutable(launch.command) === undefined) {
    cannotStart(launch);
    return;
  }
  const serverOptions: ServerOptions = {
    command: launch.command,
    args: launch.args,
    transport: TransportKind.stdio,
    options: { cwd: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
    ],
    outputChannel: output,
    traceOutputChannel: output,
    synchronize: {
      fileEvents: vscode.workspace.createFileSystemWatcher("**/pyproject.toml"),
    },
    initializationOptions: settingsForServer(config),
    middleware: {
      workspace: {
        // Answer the server's workspace/configuration requests for the
        // `tilelint` section without the client-only keys and empty values.
        configuration: async (params, token, next) => {
          const result = await next(params, token);
          if (!Array.isArray(result)) {
            return result;
          }
          return result.map((value, i) =>
            params.items[i]?.section === SECTION && value && typeof value === "object"
              ? cleanSettings(value as Record<string, unknown>)
              : value,
          );
        },
      },
    },
  };
  client = new LanguageClient("tilelint", "tilelint", serverOptions, clientOptions);
  try {
    await client.start();
  } catch (err) {
    cannotStart(launch, err);
    client = undefined;
  }
}

async function stop(): Promise<void> {
  const c = client;
  client = undefined;
  if (c) {
    try {
      await c.stop();
    } catch (err) {
      output?.appendLine(`tilelint: error while stopping the server: ${err}`);
    }
  }
}

async function restart(context: vscode.ExtensionContext): Promise<void> {
  if (starting) {
    await starting;
  }
  starting = (async () => {
    await stop();
    await start(context);
  })();
  try {
    await starting;
  } finally {
    starting = undefined;
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("tilelint");
  context.subscriptions.push(output);
  context.subscriptions.push(
    vscode.commands.registerCommand("tilelint.restart", () => restart(context)),
    vscode.commands.registerCommand("tilelint.showOutput", () => output?.show()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (
        e.affectsConfiguration("tilelint.path") ||
        e.affectsConfiguration("tilelint.interpreter") ||
        e.affectsConfiguration("tilelint.target") ||
        e.affectsConfiguration("tilelint.args")
      ) {
        void restart(context);
      }
    }),
  );
  // The trust flag travels in initializationOptions: restart once it is granted.
  context.subscriptions.push(vscode.workspace.onDidGrantWorkspaceTrust(() => void restart(context)));
  const py = vscode.extensions.getExtension("ms-python.python");
  if (py) {
    // Follow interpreter changes when the interpreter comes from ms-python.
    try {
      const { PythonExtension } = await import("@vscode/python-extension");
      const api = await PythonExtension.api();
      context.subscriptions.push(
        api.environments.onDidChangeActiveEnvironmentPath(() => {
          const cfg = vscode.workspace.getConfiguration(SECTION);
          if (cfg.get<string[]>("path", []).length === 0 && cfg.get<string[]>("interpreter", []).length === 0) {
            void restart(context);
          }
        }),
      );
    } catch {
      // The Python extension is optional.
    }
  }
  await restart(context);
}

export async function deactivate(): Promise<void> {
  await stop();
}
