// Package portowner tells who listens on a TCP port, and whether that is a
// given systemd unit (issue 27, item 1: a local user must not take a
// replica's traffic by binding its port first).
//
// Dump reads every listening TCP socket of the daemon's network namespace
// (IPv4 and IPv6) with one sock_diag request per family
// (NETLINK_SOCK_DIAG, inet_diag): its local address and port, its owner's
// uid, its inode and, on kernels 5.7 and later, the id of the cgroup it
// was created in (INET_DIAG_CGROUP_ID). A round of checks shares one Dump:
// its cost does not grow with the replicas checked.
//
// Table.Held judges a unit's ports against its cgroup directory. A
// listener is the unit's when
//
//   - its cgroup id is the unit's cgroup or one below it (on cgroup2 a
//     cgroup's id is its directory's inode number): the common case, one
//     stat(2) per unit and no /proc access;
//   - else, on a port of the unit's socket unit (HeldBesides), it was
//     created by uid 0 in that socket unit's cgroup or in init.scope:
//     systemd bound it, and no other process can create a socket there;
//   - else, its inode is held open by a process of the unit (cgroup.procs,
//     then /proc/PID/fd links "socket:[INODE]"): a socket created by
//     someone else and handed to the replica, as systemd does for a
//     socket-activated port (PID 1's cgroup id, the replica's
//     descriptor). Reading another user's /proc/PID/fd needs
//     CAP_SYS_PTRACE, which the daemon's unit does not grant, so this
//     rule holds only for replicas that run as root, or a daemon given
//     that capability;
//   - else, only when the kernel gave no cgroup id and the descriptors
//     could not be read: its uid is the uid of a process of the unit.
//
// Every other listener on one of the unit's ports is foreign, the port
// squatted: Held says which, and Table.Holders names the processes that
// hold it (by its cgroup's cgroup.procs, narrowed by their descriptors
// where those can be read), for one journal entry per episode.
//
// A port on which nothing listens is not squatted: the replica may not
// have bound it yet, or not use it at all. Every listener on the port
// counts, whatever its address: the daemon cannot tell which address a
// proxy will reach, and a second listener on the port is not the
// replica's either way.
package portowner
