#!/bin/sh
# cairn package: after removal. The checkpoints are the user's data: neither
# removal nor purge deletes /var/lib/cairn (plain-layout stores and ledgers) or
# any store inside a workspace (.hankweave/checkpoints). Purge (rpm: erase)
# removes /etc/cairn/config.toml only if postinstall wrote it and it is
# unchanged since: a config `cairn service install` or the user wrote, or one
# edited since, stays.
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
# The config: deleted on purge (deb) or erase (rpm) only if it is the
# package's own copy, byte for byte.
conf=/etc/cairn/config.toml
mark=/etc/cairn/.config.toml.package-sha256
if [ "$1" = purge ] || [ "$1" = 0 ]; then
	if [ -f "$mark" ] && [ -f "$conf" ] && [ ! -L "$conf" ] &&
		[ "$(sha256sum "$conf" | cut -d' ' -f1)" = "$(cat "$mark")" ]; then
		rm -f "$conf"
	elif [ -e "$conf" ]; then
		echo "cairn: kept $conf (not the package's unchanged default)"
	fi
	rm -f "$mark"
	rmdir /etc/cairn 2>/dev/null || true
fi

if [ "$1" != purge ] && [ -d /var/lib/cairn ]; then
	echo "cairn: removed. Kept: /var/lib/cairn and every workspace's checkpoint store and ledger;"
	echo "delete them by hand if you no longer want those checkpoints."
fi
exit 0
