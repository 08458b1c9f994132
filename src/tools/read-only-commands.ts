/**
 * The read-only allow list: the simple commands that the `untrusted` approval policy runs without
 * asking (see isReadOnlyCommand in command-parse.ts, which splits the command line first).
 *
 * It is an allow list of programs AND of the flags each may take, so it must never let through a
 * word that makes a program run another program or write a file. Every flag is parsed the way the
 * program itself parses it (getopt_long: combined short flags, `-n5`/`-n 5`, `--lines=5`/`--lines 5`,
 * `--` ending the options, options after operands); a flag that is not listed, an abbreviated long
 * flag, or a value where a flag takes none makes the command need approval. Where we are unsure
 * whether a program consumes the next word as a flag's value we leave the flag out: treating a word
 * as a value that the program reads as a flag would let that flag through unchecked.
 *
 * Residual risk, accepted knowingly: git reads repository config, which can name programs that the
 * read subcommands run (core.fsmonitor, diff drivers and textconv filters for `git diff/log/show/
 * blame`, gpg for log.showSignature). A model cannot write that config without approval under this
 * policy, and every command still runs inside the OS sandbox (bubblewrap), so such a program gets no
 * more than the command itself would. (`git status` and `git describe --dirty` may also refresh the
 * stat cache in .git/index: git's own bookkeeping, not content.)
 */

/** One shell word after quote removal; `globAt` is the offset of its first unquoted `*`, `?` or `[` (-1: none). */
export interface ShellWord {
  text: string;
  globAt: number;
}

type Arity = "none" | "required" | "optional";

interface ParsedFlag {
  name: string;
  value?: string;
}

interface ParsedArgs {
  flags: ParsedFlag[];
  operands: string[];
}

interface ProgramSpec {
  flags: Map<string, Arity>;
  /** `-5` is a count (head, tail, git log) or a context size (grep). */
  numeric?: boolean;
  /** Options end at the first operand (bash builtins); GNU tools read options anywhere before `--`. */
  stopAtOperand?: boolean;
  /** Short flags that take a value must end their cluster and take the next word (tree's own parser). */
  noAttachedValues?: boolean;
  /** More operands than this need approval (`uniq in out` writes `out`). */
  maxOperands?: number;
  /** Any word at all is fine (echo, true: bash builtins that never run or write anything). */
  anyArgs?: boolean;
  /** A last look at the parsed flags and operands. */
  check?: (p: ParsedArgs) => boolean;
}

/**
 * Flags as one string: `-l` takes no value, `-n=` requires one (attached or the next word),
 * `--color?` has an optional one that can only be attached (`--color=auto`, `-uno`).
 * `--help` and `--version` only print, for every program given through this helper.
 */
function spec(flags: string, opts: Omit<ProgramSpec, "flags"> = {}, helpFlags = true): ProgramSpec {
  const map = new Map<string, Arity>();
  for (const f of `${flags}${helpFlags ? " --help --version" : ""}`.split(/\s+/).filter(Boolean)) {
    if (f.endsWith("=")) map.set(f.slice(0, -1), "required");
    else if (f.endsWith("?")) map.set(f.slice(0, -1), "optional");
    else map.set(f, "none");
  }
  return { ...opts, flags: map };
}

/**
 * Parses arguments against a spec; null when any word is not allowed. A word with an unquoted glob
 * may expand to several words, so it is refused wherever that could smuggle in a flag or shift the
 * words after it: as a flag (unless the glob is in a `--name=` value, whose expansions all keep the
 * `--name=` prefix), as a separate flag value, and as an operand when operands are counted.
 */
function parseArgs(args: readonly ShellWord[], s: ProgramSpec): ParsedArgs | null {
  const flags: ParsedFlag[] = [];
  const operands: string[] = [];
  let optionsEnded = false;
  for (let i = 0; i < args.length; i++) {
    const { text, globAt } = args[i];
    const takeValue = (): string | null => {
      const next = args[++i];
      return next === undefined || next.globAt >= 0 ? null : next.text;
    };
    if (optionsEnded || text === "-" || !text.startsWith("-")) {
      if (globAt >= 0 && s.maxOperands !== undefined) return null;
      operands.push(text);
      if (s.stopAtOperand) optionsEnded = true;
      continue;
    }
    if (text === "--") {
      optionsEnded = true;
      continue;
    }
    if (text.startsWith("--")) {
      const eq = text.indexOf("=");
      const name = eq < 0 ? text : text.slice(0, eq);
      const arity = s.flags.get(name);
      if (arity === undefined || (globAt >= 0 && (eq < 0 || globAt < eq))) return null;
      if (eq >= 0) {
        if (arity === "none") return null;
        flags.push({ name, value: text.slice(eq + 1) });
      } else if (arity === "required") {
        const value = takeValue();
        if (value === null) return null;
        flags.push({ name, value });
      } else flags.push({ name });
      continue;
    }
    if (globAt >= 0) return null;
    if (s.numeric && /^-\d+$/.test(text)) {
      flags.push({ name: "-NUM", value: text.slice(1) });
      continue;
    }
    for (let j = 1; j < text.length; j++) {
      const name = `-${text[j]}`;
      const arity = s.flags.get(name);
      if (arity === undefined) return null;
      if (arity === "none") {
        flags.push({ name });
        continue;
      }
      const attached = text.slice(j + 1);
      if (attached !== "" && s.noAttachedValues) return null;
      if (attached !== "" || arity === "optional") flags.push({ name, value: attached === "" ? undefined : attached });
      else {
        const value = takeValue();
        if (value === null) return null;
        flags.push({ name, value });
      }
      break;
    }
  }
  if (s.maxOperands !== undefined && operands.length > s.maxOperands) return null;
  return { flags, operands };
}

function allowedBy(s: ProgramSpec, args: readonly ShellWord[]): boolean {
  if (s.anyArgs) return true;
  const parsed = parseArgs(args, s);
  return parsed !== null && (s.check?.(parsed) ?? true);
}

// ---------------------------------------------------------------------------------------------
// Programs. Left out on purpose: pagers and editors (less, more, vim, man: they run shells),
// everything that runs another program (xargs, env, nohup, timeout, nice, watch, stdbuf, command,
// exec, eval, source, parallel, awk's system()), tee, and flags that write or run: sort -o/-T/
// --compress-program, rg --pre/--pre-glob/-z/--hostname-bin, tree -o/-R, file -C/-z/-Z/-p,
// diff -l (runs pr), tail -f (never ends), printf -v.

const GREP = spec(
  "-E -F -G -P -i -y --no-ignore-case -v -w -x -c -L -l -o -q -s -b -H -h -n -T -Z -z -a -I -r -R -U -e= -f= -m= -A= -B= -C= -d= " +
    "-D= --label= --binary-files= --devices= --directories= --exclude= --exclude-from= --exclude-dir= --include= --regexp= --file= " +
    "--max-count= --after-context= --before-context= --context= --color? --colour? --extended-regexp --fixed-strings --basic-regexp " +
    "--perl-regexp --ignore-case --invert-match --word-regexp --line-regexp --count --files-without-match --files-with-matches " +
    "--only-matching --quiet --silent --no-messages --byte-offset --with-filename --no-filename --line-number --initial-tab --null " +
    "--null-data --text --recursive --dereference-recursive --line-buffered --binary",
  { numeric: true },
);

const HEAD_TAIL = spec("-c= -n= -q -v -z --bytes= --lines= --quiet --silent --verbose --zero-terminated", { numeric: true });

const PROGRAMS: Record<string, ProgramSpec | ((args: readonly ShellWord[]) => boolean)> = {
  echo: spec("", { anyArgs: true }),
  true: spec("", { anyArgs: true }),
  false: spec("", { anyArgs: true }),
  // bash's builtin printf: only `--` before the format (no `-v VAR`); later words are arguments.
  printf: spec("", { stopAtOperand: true }, false),
  pwd: spec("-L -P"),
  cd: spec("-L -P", {}, false),
  whoami: spec(""),
  uname: spec(
    "-a -s -n -r -v -m -p -i -o --all --kernel-name --nodename --kernel-release --kernel-version --machine --processor " +
      "--hardware-platform --operating-system",
  ),
  id: spec("-a -Z -g -G -n -r -u -z --context --group --groups --name --real --user --zero"),
  which: spec("-a -s", {}, false),
  ls: spec(
    "-a -A -b -B -c -C -d -D -f -F -g -G -h -H -i -k -l -L -m -n -N -o -p -q -Q -r -R -s -S -t -u -U -v -x -X -Z -1 -I= -T= -w= " +
      "--all --almost-all --author --escape --ignore-backups --directory --dired --file-type --full-time --group-directories-first " +
      "--no-group --human-readable --si --dereference-command-line --dereference-command-line-symlink-to-dir --inode --kibibytes " +
      "--dereference --literal --numeric-uid-gid --hide-control-chars --show-control-chars --quote-name --reverse --recursive " +
      "--size --context --zero --color? --classify? --hyperlink? --block-size= --format= --hide= --ignore= --indicator-style= " +
      "--quoting-style= --sort= --time= --time-style= --tabsize= --width=",
  ),
  cat: spec(
    "-A -b -e -E -n -s -t -T -u -v --show-all --number-nonblank --show-ends --number --squeeze-blank --show-tabs --show-nonprinting",
  ),
  head: HEAD_TAIL,
  tail: HEAD_TAIL,
  wc: spec("-c -m -l -L -w --bytes --chars --lines --max-line-length --words --files0-from= --total="),
  grep: GREP,
  egrep: GREP,
  fgrep: GREP,
  rg: spec(
    "-i -s -S -v -w -x -F -n -N -l -c -o -u -L -H -I -a -U -P -0 -q -p -b -h -V -e= -f= -g= -t= -T= -A= -B= -C= -m= -M= -j= -r= -E= " +
      "-d= --regexp= --file= --glob= --iglob= --type= --type-not= --type-add= --type-clear= --after-context= --before-context= " +
      "--context= --max-count= --max-depth= --maxdepth= --max-columns= --max-filesize= --threads= --replace= --encoding= --color= " +
      "--colors= --sort= --sortr= --ignore-file= --path-separator= --context-separator= --field-match-separator= " +
      "--field-context-separator= --engine= --no-heading --heading --hidden --no-hidden --no-ignore --no-ignore-vcs " +
      "--no-ignore-parent --no-ignore-dot --no-ignore-global --no-ignore-exclude --no-ignore-files --no-ignore-messages --files " +
      "--files-with-matches --files-without-match --count --count-matches --only-matching --line-number --no-line-number --column " +
      "--no-column --ignore-case --case-sensitive --smart-case --invert-match --word-regexp --line-regexp --fixed-strings --follow " +
      "--with-filename --no-filename --text --multiline --multiline-dotall --pcre2 --null --null-data --quiet --pretty " +
      "--byte-offset --vimgrep --json --stats --trim --sort-files --no-messages --no-config --one-file-system --crlf --passthru " +
      "--binary --no-require-git --block-buffered --line-buffered --unrestricted --type-list --include-zero --glob-case-insensitive " +
      "--max-columns-preview --mmap --no-mmap --no-unicode",
  ),
  stat: spec("-L -f -t --dereference --file-system --terse -c= --format= --printf= --cached="),
  du: spec(
    "-a -b -c -D -h -H -k -l -L -m -P -s -S -x -0 -d= -B= -X= -t= --all --apparent-size --bytes --total --dereference-args " +
      "--human-readable --si --inodes --count-links --dereference --no-dereference --separate-dirs --summarize --one-file-system " +
      "--null --max-depth= --block-size= --exclude= --exclude-from= --threshold= --time? --time-style= --files0-from=",
  ),
  df: spec(
    "-a -h -H -i -k -l -P -T -B= -t= -x= --all --human-readable --si --inodes --local --portability --print-type --total --no-sync " +
      "--sync --block-size= --type= --exclude-type= --output?",
  ),
  basename: spec("-a -z -s= --multiple --zero --suffix="),
  dirname: spec("-z --zero"),
  realpath: spec(
    "-e -m -L -P -q -s -z --canonicalize-existing --canonicalize-missing --logical --physical --quiet --strip --no-symlinks --zero " +
      "--relative-to= --relative-base=",
  ),
  readlink: spec(
    "-f -e -m -n -q -s -v -z --canonicalize --canonicalize-existing --canonicalize-missing --no-newline --quiet --silent --verbose " +
      "--zero",
  ),
  cut: spec(
    "-n -s -z -b= -c= -d= -f= --bytes= --characters= --delimiter= --fields= --complement --only-delimited --output-delimiter= " +
      "--zero-terminated",
  ),
  tr: spec("-c -C -d -s -t --complement --delete --squeeze-repeats --truncate-set1"),
  nl: spec(
    "-p -b= -d= -f= -h= -i= -l= -n= -s= -v= -w= --body-numbering= --section-delimiter= --footer-numbering= --header-numbering= " +
      "--line-increment= --join-blank-lines= --number-format= --no-renumber --number-separator= --starting-line-number= " +
      "--number-width=",
  ),
  diff: spec(
    "-q -s -c -u -e -n -y -t -T -r -N -i -E -Z -b -w -B -a -p -d -C= -U= -W= -x= -X= -S= -I= -F= --normal --brief " +
      "--report-identical-files --ed --rcs --side-by-side --left-column --suppress-common-lines --show-c-function --expand-tabs " +
      "--initial-tab --suppress-blank-empty --recursive --no-dereference --new-file --unidirectional-new-file " +
      "--ignore-file-name-case --no-ignore-file-name-case --ignore-case --ignore-tab-expansion --ignore-trailing-space " +
      "--ignore-space-change --ignore-all-space --ignore-blank-lines --text --strip-trailing-cr --minimal --speed-large-files " +
      "--context? --unified? --color? --width= --tabsize= --exclude= --exclude-from= --starting-file= --ignore-matching-lines= " +
      "--show-function-line= --label= --from-file= --to-file= --horizon-lines= --palette=",
  ),
  cmp: spec("-b -l -s -i= -n= --print-bytes --verbose --quiet --silent --ignore-initial= --bytes="),
  sort: spec(
    "-b -d -f -g -i -M -h -n -R -r -V -c -C -m -s -u -z -k= -t= -S= --ignore-leading-blanks --dictionary-order --ignore-case " +
      "--general-numeric-sort --ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort --random-sort --reverse " +
      "--version-sort --merge --stable --unique --zero-terminated --debug --check? --key= --field-separator= --buffer-size= --sort= " +
      "--parallel= --random-source= --files0-from=",
  ),
  // A second operand is a file uniq writes.
  uniq: spec(
    "-c -d -D -i -u -z -f= -s= -w= --count --repeated --ignore-case --unique --zero-terminated --all-repeated? --group? " +
      "--skip-fields= --skip-chars= --check-chars=",
    { maxOperands: 1 },
  ),
  file: spec(
    "-b -L -h -i -k -N -n -r -s -0 -E -e= -f= -F= -P= --brief --dereference --no-dereference --mime --mime-type --mime-encoding " +
      "--keep-going --no-pad --no-buffer --raw --special-files --print0 --extension --exclude= --files-from= --separator= " +
      "--parameter=",
  ),
  tree: spec(
    "-a -d -l -f -x -i -q -N -Q -p -u -g -s -h -D -F -v -t -c -U -r -C -n -J -X -L= -P= -I= --inodes --device --noreport " +
      "--dirsfirst --filesfirst --gitignore --ignore-case --matchdirs --prune --si --du --filelimit= --sort= --timefmt= --charset=",
    { noAttachedValues: true },
  ),
  find: isReadOnlyFind,
  sed: isReadOnlySedPrint,
  git: isReadOnlyGit,
};

// `sed -n <N>p` / `sed -n <N>,<M>p` and file names only: how models read a range of lines.
// Nothing else: sed scripts can write files (`w`) and run commands (`e`, `s///e`).
function isReadOnlySedPrint(args: readonly ShellWord[]): boolean {
  const [flag, script, ...files] = args;
  return (
    flag?.text === "-n" &&
    script !== undefined &&
    /^(\d+|\$)(,(\d+|\$))?p$/.test(script.text) &&
    files.every((f) => !f.text.startsWith("-")) // GNU sed reads options after operands too (`-i`)
  );
}

// find: start points, then an expression of tests, operators and printing actions only.
// Never -exec/-execdir/-ok/-okdir (run programs), -delete, -fprint*/-fls (write files).
const FIND_PLAIN = new Set(
  (
    "-print -print0 -ls -prune -quit -depth -follow -xdev -mount -noleaf -daystart -empty -readable -writable -executable -nouser " +
    "-nogroup -true -false -not -a -and -o -or ! , ( )"
  ).split(" "),
);
const FIND_VALUED = new Set(
  (
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -regextype -lname -ilname -type -xtype -maxdepth -mindepth " +
    "-size -newer -anewer -cnewer -mtime -mmin -atime -amin -ctime -cmin -used -perm -user -group -uid -gid -links -inum -samefile " +
    "-printf -fstype"
  ).split(" "),
);

function isReadOnlyFind(args: readonly ShellWord[]): boolean {
  let i = 0;
  while (i < args.length && ["-H", "-L", "-P"].includes(args[i].text)) i++;
  const startsExpression = (t: string) => (t.startsWith("-") && t.length > 1) || ["(", ")", "!", ","].includes(t);
  while (i < args.length && !startsExpression(args[i].text)) i++; // start points; globs here only add start points
  for (; i < args.length; i++) {
    const { text, globAt } = args[i];
    if (globAt >= 0) return false;
    if (FIND_PLAIN.has(text)) continue;
    if (!FIND_VALUED.has(text) && !/^-newer[aBcm][aBcmt]$/.test(text)) return false;
    const value = args[++i];
    if (value === undefined || value.globAt >= 0) return false;
  }
  return true;
}

// git: read subcommands only, each with its own flags. No global options but `--no-pager` (no
// `-c`, `-C`, `--git-dir`, `--exec-path`, `-p`…), no `--output`, `--ext-diff`, `--textconv`,
// `--show-signature`, and no `git grep -O`/`--open-files-in-pager` (runs its value as a pager).
const GIT_DIFF =
  "-p -u --patch -s --no-patch -U? --unified? --raw --patch-with-raw --patch-with-stat --stat? --compact-summary --numstat " +
  "--shortstat --dirstat? --summary --name-only --name-status --submodule? --color? --no-color --color-moved? --no-color-moved " +
  "--word-diff? --word-diff-regex= --color-words? --no-renames --check --full-index --binary --abbrev? -B? --break-rewrites? -M? " +
  "--find-renames? -C? --find-copies? --find-copies-harder -D --irreversible-delete --diff-filter= -S= -G= --pickaxe-all " +
  "--pickaxe-regex -R --relative? --no-relative -a --text --ignore-cr-at-eol --ignore-space-at-eol -b --ignore-space-change -w " +
  "--ignore-all-space --ignore-blank-lines -I= --ignore-matching-lines= --inter-hunk-context= -W --function-context --exit-code " +
  "--quiet --no-ext-diff --no-textconv --ignore-submodules? --src-prefix= --dst-prefix= --no-prefix --line-prefix= --minimal " +
  "--patience --histogram --diff-algorithm= --anchored= --indent-heuristic --no-indent-heuristic -z --ws-error-highlight=";
const GIT_LOG =
  "-n= --max-count= --skip= --since= --after= --until= --before= --author= --committer= --grep= --date= -L= --oneline --graph --all " +
  "--branches? --tags? --remotes? --decorate? --no-decorate --source --format? --pretty? --abbrev-commit --no-abbrev-commit " +
  "--relative-date --no-merges --merges --first-parent --reverse --follow --topo-order --date-order --author-date-order " +
  "--left-right --cherry-pick --cherry-mark --boundary --full-history --simplify-by-decoration --no-walk? -i --regexp-ignore-case " +
  "--all-match --invert-grep -E --extended-regexp -F --fixed-strings -P --perl-regexp -g --walk-reflogs --parents --children " +
  "--mailmap --use-mailmap --encoding? --notes? --no-notes -m --cc --full-diff";
// `%G…` placeholders make git run gpg (gpg.program) to check signatures.
const noSignaturePlaceholder = (p: ParsedArgs) =>
  !p.flags.some((f) => (f.name === "--format" || f.name === "--pretty") && (f.value ?? "").includes("%G"));

// git runs `man` for `--help`, so git flag lists do not get it.
const gitSpec = (flags: string, opts: Omit<ProgramSpec, "flags"> = {}) => spec(flags, opts, false);

const GIT: Record<string, ProgramSpec> = {
  status: gitSpec(
    "-s --short -b --branch --porcelain? --long -v --verbose -u? --untracked-files? --ignored? --ignore-submodules? -z --show-stash " +
      "--ahead-behind --no-ahead-behind --renames --no-renames --find-renames?",
  ),
  diff: gitSpec(`${GIT_DIFF} --cached --staged --merge-base --no-index`),
  log: gitSpec(`${GIT_DIFF} ${GIT_LOG}`, { numeric: true, check: noSignaturePlaceholder }),
  show: gitSpec(`${GIT_DIFF} ${GIT_LOG}`, { numeric: true, check: noSignaturePlaceholder }),
  shortlog: gitSpec(
    "-s --summary -n --numbered -e --email -c --committer --group= --no-merges --merges --all --since= --until= --after= --before= " +
      "--author= --first-parent --reverse",
  ),
  "rev-parse": gitSpec(
    "--show-toplevel --abbrev-ref? --short? --verify -q --quiet --symbolic --symbolic-full-name --git-dir --absolute-git-dir " +
      "--git-common-dir --is-inside-work-tree --is-inside-git-dir --is-bare-repository --is-shallow-repository --show-prefix " +
      "--show-cdup --show-superproject-working-tree --all --branches? --tags? --remotes?",
  ),
  "ls-files": gitSpec(
    "-c --cached -d --deleted -m --modified -o --others -i --ignored -s --stage -u --unmerged -k --killed -t -v -f -z --directory " +
      "--no-empty-directory --eol --deduplicate --full-name --error-unmatch --exclude-standard --recurse-submodules -x= --exclude= " +
      "-X= --exclude-from= --exclude-per-directory= --abbrev? --format=",
  ),
  blame: gitSpec(
    "-L= -l -t -s -e -w -n -f -c -b -p --porcelain --line-porcelain --root --show-name --show-number --show-email --date= -M? -C? " +
      "--ignore-rev= --ignore-revs-file= --first-parent --color-lines --color-by-age --minimal --progress --no-progress " +
      "--incremental --abbrev?",
  ),
  describe: gitSpec(
    "--all --tags --contains --long --always --exact-match --first-parent --debug --abbrev? --candidates= --match= --exclude= " +
      "--dirty? --broken?",
  ),
  "cat-file": gitSpec("-t -s -e -p"),
  grep: gitSpec(
    "-n --line-number -i --ignore-case -w --word-regexp -v --invert-match -l --files-with-matches --name-only -L " +
      "--files-without-match -c --count -h -H --full-name -E --extended-regexp -F --fixed-strings -G --basic-regexp -P " +
      "--perl-regexp -e= -f= -A= -B= -C= --after-context= --before-context= --context= -I -a --text -o --only-matching -q --quiet " +
      "-z --null -W --function-context -p --show-function --cached --untracked --no-index --exclude-standard --no-exclude-standard " +
      "--recurse-submodules --max-depth= --threads= --and --or --not --all-match --break --heading --column --color? --no-color -r " +
      "--recursive --no-recursive",
    { numeric: true },
  ),
  // Listing forms only: without `--list` an operand is the name of a branch to create.
  // (`-l` is not `--list` in older git, where it meant --create-reflog.)
  branch: gitSpec(
    "-a --all -r --remotes -v --verbose --list --show-current --no-color -i --ignore-case --contains= --no-contains= --merged= " +
      "--no-merged= --points-at= --sort=",
    { check: (p) => p.operands.length === 0 || p.flags.some((f) => f.name === "--list") },
  ),
};

function isReadOnlyGit(args: readonly ShellWord[]): boolean {
  let i = 0;
  while (args[i]?.text === "--no-pager") i++; // the only global option: it can only stop a pager
  const sub = args[i];
  const s = sub !== undefined && sub.globAt < 0 && Object.hasOwn(GIT, sub.text) ? GIT[sub.text] : undefined;
  return s !== undefined && allowedBy(s, args.slice(i + 1));
}

/** True when this simple command (argv words) is on the read-only allow list. */
export function isReadOnlyProgram(words: readonly ShellWord[]): boolean {
  const [cmd, ...args] = words;
  if (cmd === undefined || cmd.globAt >= 0 || !Object.hasOwn(PROGRAMS, cmd.text)) return false;
  const s = PROGRAMS[cmd.text];
  return typeof s === "function" ? s(args) : allowedBy(s, args);
}
