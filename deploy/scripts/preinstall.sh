#!/bin/sh
# Runs before the deb/rpm package's files are installed: creates the system
# user and group the units run as. No login shell, no home of its own (its
# state lives in /var/lib/schedulemaster, made by the units' StateDirectory=).
set -e

if ! getent group schedulemaster >/dev/null 2>&1; then
	groupadd --system schedulemaster
fi
if ! getent passwd schedulemaster >/dev/null 2>&1; then
	nologin=/usr/sbin/nologin
	[ -x "$nologin" ] || nologin=/sbin/nologin
	useradd --system --gid schedulemaster --no-create-home \
		--home-dir /var/lib/schedulemaster --shell "$nologin" \
		--comment "ScheduleMaster" schedulemaster
fi
exit 0
