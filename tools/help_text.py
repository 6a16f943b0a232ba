"""What the build tools read from `stratbench --help` (shared by gen_man.py and
gen_completion.py, so the two agree on where the command list is)."""


def commands(main_help):
    """The command names under the "commands:" heading of `stratbench --help`."""
    names, inside = [], False
    for line in main_help.splitlines():
        if line.strip() == "commands:":
            inside = True
        elif inside and not line.strip():
            break
        elif inside:
            names.append(line.split()[0])
    return names
