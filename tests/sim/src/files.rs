//! The simulator's plain-HTTP file server: serves the base ISO (and whatever else lies under
//! its root) the way a mirror of the RHCOS artifacts does, so the plugin's download, resume and
//! sha256 checks run against a real HTTP server.
//!
//! GET and HEAD only (405 otherwise, with `Allow: GET, HEAD`); paths are percent-decoded and
//! must stay under the root: `..`, absolute components, NUL and symlinks leading outside are
//! 404, as are directories. Responses carry `Content-Length` and `Accept-Ranges: bytes`; a single `Range: bytes=a-b` / `a-` / `-n`
//! is answered with 206 and `Content-Range` (416 with `Content-Range: bytes */len` when it
//! cannot be satisfied; multi-range requests get the whole file, 200, which RFC 9110 allows).

use std::convert::Infallible;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Frame;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

type Body = BoxBody<Bytes, std::io::Error>;

/// Serves files under `root` on every connection accepted from `listener` until the task is
/// dropped or aborted. Errors only if `root` is not a directory; per-connection errors are
/// logged and do not stop the server.
pub async fn serve_files(listener: tokio::net::TcpListener, root: PathBuf) -> anyhow::Result<()> {
    let root = std::fs::canonicalize(&root)
        .map_err(|e| anyhow::anyhow!("file server root {}: {e}", root.display()))?;
    if !root.is_dir() {
        anyhow::bail!("file server root {} is not a directory", root.display());
    }
    let root = Arc::new(root);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("file server accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let root = root.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let root = root.clone();
                async move { Ok::<_, Infallible>(handle(&root, req).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, svc)
                .await
            {
                tracing::debug!("file server connection from {peer}: {e}");
            }
        });
    }
}

fn full(status: StatusCode, text: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header(header::CONTENT_LENGTH, text.len())
        .body(
            Full::new(Bytes::from(text.to_string()))
                .map_err(|e| match e {})
                .boxed(),
        )
        .expect("static response")
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The file under `root` named by a request path, or None (traversal, missing, not a file).
fn resolve(root: &Path, uri_path: &str) -> Option<PathBuf> {
    let decoded = percent_decode(uri_path)?;
    if decoded.contains('\0') {
        return None;
    }
    let rel = Path::new(decoded.trim_start_matches('/'));
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let full = std::fs::canonicalize(root.join(rel)).ok()?;
    (full.starts_with(root) && full.is_file()).then_some(full)
}

/// Parses a single `bytes=` range against `len`: Ok(Some((start, end_inclusive))), Ok(None) to
/// ignore it (multi-range or foreign unit), Err(()) when unsatisfiable.
fn parse_range(v: &str, len: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = v.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let (a, b) = spec.split_once('-').ok_or(())?;
    let (a, b) = (a.trim(), b.trim());
    let r = if a.is_empty() {
        let n: u64 = b.parse().map_err(|_| ())?;
        if n == 0 || len == 0 {
            return Err(());
        }
        (len - n.min(len), len - 1)
    } else {
        let start: u64 = a.parse().map_err(|_| ())?;
        let end = if b.is_empty() {
            len.saturating_sub(1)
        } else {
            b.parse::<u64>().map_err(|_| ())?.min(len.saturating_sub(1))
        };
        if start >= len || end < start {
            return Err(());
        }
        (start, end)
    };
    Ok(Some(r))
}

async fn handle(root: &Path, req: Request<hyper::body::Incoming>) -> Response<Body> {
    let method = req.method().clone();
    if method != Method::GET && method != Method::HEAD {
        let mut r = full(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let Some(path) = resolve(root, req.uri().path()) else {
        return full(StatusCode::NOT_FOUND, "not found\n");
    };
    let mut file = match tokio::fs::File::open(&path).await {
        Ok(f) => f,
        Err(_) => return full(StatusCode::NOT_FOUND, "not found\n"),
    };
    let len = match file.metadata().await {
        Ok(m) => m.len(),
        Err(_) => return full(StatusCode::NOT_FOUND, "not found\n"),
    };
    let range = match req.headers().get(header::RANGE).and_then(|v| v.to_str().ok()) {
        None => None,
        Some(v) => match parse_range(v, len) {
            Ok(r) => r,
            Err(()) => {
                let mut r = full(StatusCode::RANGE_NOT_SATISFIABLE, "range not satisfiable\n");
                r.headers_mut()
                    .insert(header::CONTENT_RANGE, format!("bytes */{len}").parse().unwrap());
                return r;
            }
        },
    };
    let (status, start, count) = match range {
        Some((s, e)) => (StatusCode::PARTIAL_CONTENT, s, e - s + 1),
        None => (StatusCode::OK, 0, len),
    };
    let mut builder = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, count)
        .header(header::ACCEPT_RANGES, "bytes");
    if status == StatusCode::PARTIAL_CONTENT {
        builder = builder.header(
            header::CONTENT_RANGE,
            format!("bytes {}-{}/{len}", start, start + count - 1),
        );
    }
    if method == Method::HEAD {
        return builder
            .body(Full::new(Bytes::new()).map_err(|e| match e {}).boxed())
            .expect("response");
    }
    if start > 0 && file.seek(std::io::SeekFrom::Start(start)).await.is_err() {
        return full(StatusCode::INTERNAL_SERVER_ERROR, "seek failed\n");
    }
    let stream = futures::stream::unfold((file.take(count), false), |(mut f, done)| async move {
        if done {
            return None;
        }
        let mut buf = vec![0u8; 64 * 1024];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Frame::data(Bytes::from(buf))), (f, false)))
            }
            Err(e) => Some((Err(e), (f, true))),
        }
    });
    builder
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .expect("response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Ok(Some((0, 9))));
        assert_eq!(parse_range("bytes=90-", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=-10", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=50-1000", 100), Ok(Some((50, 99))));
        assert_eq!(parse_range("bytes=100-", 100), Err(()));
        assert_eq!(parse_range("bytes=5-2", 100), Err(()));
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Ok(None));
        assert_eq!(parse_range("items=0-1", 100), Ok(None));
    }

    #[test]
    fn traversal_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.iso"), b"x").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        assert!(resolve(&root, "/a.iso").is_some());
        assert!(resolve(&root, "/%61.iso").is_some());
        assert!(resolve(&root, "/../etc/passwd").is_none());
        assert!(resolve(&root, "/%2e%2e/etc/passwd").is_none());
        assert!(resolve(&root, "/sub").is_none());
        assert!(resolve(&root, "/sub/../a.iso").is_none());
        assert!(resolve(&root, "/missing").is_none());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc/hostname", root.join("link")).unwrap();
            assert!(resolve(&root, "/link").is_none());
        }
    }

    async fn request(addr: std::net::SocketAddr, req: &str) -> (String, Vec<u8>) {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        (
            String::from_utf8_lossy(&out[..split]).to_string(),
            out[split + 4..].to_vec(),
        )
    }

    #[tokio::test]
    async fn get_head_range_404() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("base.iso"), &data).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(serve_files(listener, dir.path().to_path_buf()));

        let (h, body) = request(
            addr,
            "GET /base.iso HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(h.starts_with("HTTP/1.1 200"), "{h}");
        assert!(h.to_ascii_lowercase().contains("content-length: 200000"), "{h}");
        assert!(body == data);

        let (h, body) = request(
            addr,
            "HEAD /base.iso HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(
            h.starts_with("HTTP/1.1 200") && h.to_ascii_lowercase().contains("content-length: 200000"),
            "{h}"
        );
        assert!(body.is_empty());

        let (h, body) = request(
            addr,
            "GET /base.iso HTTP/1.1\r\nHost: x\r\nRange: bytes=150000-\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(h.starts_with("HTTP/1.1 206"), "{h}");
        assert!(
            h.to_ascii_lowercase()
                .contains("content-range: bytes 150000-199999/200000"),
            "{h}"
        );
        assert!(body == data[150000..]);

        let (h, _) = request(
            addr,
            "GET /base.iso HTTP/1.1\r\nHost: x\r\nRange: bytes=300000-\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(
            h.starts_with("HTTP/1.1 416") && h.contains("bytes */200000"),
            "{h}"
        );

        let (h, _) = request(
            addr,
            "GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(h.starts_with("HTTP/1.1 404"), "{h}");
        let (h, _) = request(
            addr,
            "POST /base.iso HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(h.starts_with("HTTP/1.1 405"), "{h}");
        task.abort();
    }
}
