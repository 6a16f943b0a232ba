/* What this build is: version, the git commit it was built from, where it
 * installs, and what configure.py found (library versions, backends).
 *
 * The values come from build/gen/build_info.h, which tools/build_info.py
 * regenerates on every `ninja` (rewritten only when it changes), so the
 * commit follows HEAD and the working tree without a re-configure. Used by
 * `stratbench --version`, `stratbench info` and the report's environment. */
#ifndef SB_BUILD_INFO_H
#define SB_BUILD_INFO_H

/* One component the build was configured with: a name as `stratbench info`
 * prints it ("MPI", "OpenBLAS", "CUDA", ...) and the version configure.py
 * found, "" when the build does not have it (no CUDA, no NCCL). */
struct sb_build_component {
    const char *name;
    const char *key; /* lower-case JSON key of `stratbench info --json` */
    const char *version;
};

/* The version of stratbench, e.g. "0.1.0". */
const char *sb_build_version(void);

/* The 40-hex git commit the binary was built from, or "unknown" when it was
 * not built from a git checkout (or git was missing). */
const char *sb_build_commit(void);

/* 1 when tracked files differed from that commit at build time (staged or
 * not; untracked files do not count), else 0. */
int sb_build_dirty(void);

/* The source tree the binary was built from (absolute path). */
const char *sb_build_source_dir(void);

/* The install prefix configure.py was given (--prefix; default /usr/local). */
const char *sb_build_prefix(void);

/* "release" or "debug", with ", -fsanitize=..." when sanitizers are on. */
const char *sb_build_type(void);

/* The tensor backends compiled in, comma-separated: "cpu" or "cpu, cuda". */
const char *sb_build_backends(void);

/* The communicators compiled in, comma-separated: "mpi, local" (+ ", nccl"). */
const char *sb_build_comms(void);

/* The components configure.py looked for: count and entry i (0 <= i < count). */
int sb_build_component_count(void);
const struct sb_build_component *sb_build_component_at(int i);

#endif
