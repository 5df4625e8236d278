module github.com/cairn-dev/cairn

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/bmatcuk/doublestar/v4 v4.10.4
	github.com/fsnotify/fsnotify v1.10.1
	github.com/kardianos/service v1.2.4
	github.com/mattn/go-isatty v0.0.20
	github.com/rs/zerolog v1.35.1
	golang.org/x/sys v0.50.0
)

require github.com/mattn/go-colorable v0.1.14 // indirect
