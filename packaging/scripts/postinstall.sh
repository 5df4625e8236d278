#!/bin/sh
# cairn package: after install (enable and start the service) or upgrade
# (restart it if it runs). Works with systemd, with a SysV script from
# `cairn service install`, or with neither (then it says how to start cairn).
# It creates /var/lib/cairn but no script of this package ever deletes it.
#
# Arguments: deb `configure <old-version>` (old-version empty on a first
# install); rpm `1` on install, `2` or more on upgrade.

action=install
case "$1" in
configure) [ -n "$2" ] && action=upgrade ;;
abort-upgrade | abort-remove | abort-deconfigure) action=upgrade ;;
[0-9]*) [ "$1" -ge 2 ] 2>/dev/null && action=upgrade ;;
esac

# The config: the packaged default, copied at install only where there is none (one
# `cairn service install` wrote, or the user's, is never touched). What was
# copied is recorded by its checksum, so that purge deletes it only if it is
# still the package's own, unchanged.
conf_dir=/etc/cairn
conf=$conf_dir/config.toml
mark=$conf_dir/.config.toml.package-sha256
if [ "$action" = install ] && [ ! -e "$conf" ] && [ ! -L "$conf" ] && [ -r /usr/share/cairn/config.toml ]; then
	mkdir -p "$conf_dir"
	if cp /usr/share/cairn/config.toml "$conf.dpkg-tmp" && chmod 0644 "$conf.dpkg-tmp" && mv "$conf.dpkg-tmp" "$conf"; then
		sha256sum "$conf" | cut -d' ' -f1 >"$mark"
	else
		rm -f "$conf.dpkg-tmp"
		echo "cairn: could not write $conf; copy /usr/share/cairn/config.toml there by hand"
	fi
fi

# The state directory: stores and ledgers of plain-layout workspaces.
if [ ! -d /var/lib/cairn ]; then
	mkdir -p /var/lib/cairn && chmod 0755 /var/lib/cairn
fi

# inotify limits: apply the packaged drop-in now (boot applies it from then
# on), but never lower a limit that is already higher.
sysctl_conf=/usr/lib/sysctl.d/60-cairn-inotify.conf
if [ -r "$sysctl_conf" ]; then
	grep -E '^[[:space:]]*fs\.inotify\.' "$sysctl_conf" | tr -d ' \t' | while IFS='=' read -r key want; do
		f=/proc/sys/$(echo "$key" | tr . /)
		have=$(cat "$f" 2>/dev/null) || continue
		if [ "$have" -lt "$want" ] 2>/dev/null; then
			if ! (echo "$want" >"$f") 2>/dev/null; then
				echo "cairn: could not raise $key from $have to $want here (read-only /proc/sys?); it applies at the next boot, or run: sysctl -p $sysctl_conf"
			fi
		fi
	done
fi

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if [ "$action" = install ]; then
		systemctl enable cairn.service >/dev/null 2>&1 || echo "cairn: systemctl enable cairn.service failed"
		systemctl start cairn.service || echo "cairn: the service did not start; see: journalctl -u cairn"
	else
		systemctl try-restart cairn.service || echo "cairn: the service did not restart; see: journalctl -u cairn"
	fi
elif [ -x /etc/init.d/cairn ]; then
	# No systemd: the SysV script `cairn service install` writes.
	verb=start
	[ "$action" = upgrade ] && verb=restart
	if command -v service >/dev/null 2>&1; then
		service cairn "$verb" || echo "cairn: 'service cairn $verb' failed; see /var/log/cairn/cairn.log"
	else
		/etc/init.d/cairn "$verb" || echo "cairn: '/etc/init.d/cairn $verb' failed; see /var/log/cairn/cairn.log"
	fi
elif [ "$action" = install ]; then
	echo "cairn: installed; no systemd is running, so the service was not started. Start it with"
	echo "  cairn service install && cairn service start    # a SysV script, started at boot"
	echo "or run it in the foreground: cairn daemon --config /etc/cairn/config.toml"
fi
exit 0
