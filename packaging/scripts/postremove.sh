#!/bin/sh
# cairn package: after removal. The checkpoints are the user's data: neither
# removal nor purge deletes /var/lib/cairn (plain-layout stores and ledgers) or
# any store inside a workspace (.hankweave/checkpoints). Purge removes only
# /etc/cairn/config.toml, as dpkg does for every configuration file.
#
# Arguments: deb `remove`, `purge` or `upgrade <new-version>`; rpm `0` on
# removal, `1` on upgrade.

case "$1" in
remove | purge | 0) ;;
*) exit 0 ;;
esac

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" != purge ] && [ -d /var/lib/cairn ]; then
	echo "cairn: removed. Kept: /var/lib/cairn and every workspace's checkpoint store and ledger;"
	echo "delete them by hand if you no longer want those checkpoints."
fi
exit 0
