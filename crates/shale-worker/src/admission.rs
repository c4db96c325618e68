//! What a worker checks before it takes a job, in the order a hostile
//! client meets the checks: the session name, the job's fields
//! ([`shale_compact::remote::convert`]), the database path and the token's scope, the
//! database directory opened beneath the root, each input table opened
//! beneath it (no symlink followed) with its size from `fstat` checked
//! against the size the job claims, the job's real size against
//! `--max_job_bytes` (a checked sum), a free slot, and the database's
//! staging quota. Only then is a staging session opened; the job reads the
//! descriptors opened here and no others.

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;
use std::time::Instant;

use shale_compact::job::{CompactionJob, JobFile};
use shale_compact::remote::convert::job_from_proto;
use shale_compact::remote::fs::{file_id, Dir};
use shale_compact::remote::paths::{table_names, valid_session};
use tokio::sync::OwnedSemaphorePermit;
use tonic::Status;

use crate::auth::Scope;
use crate::proto::CompactRequest;
use crate::root::describe;
use crate::staging::{StagingIo, StagingRefusal};
use crate::state::WorkerInner;

/// A job that passed every check, its inputs open and its staging session
/// created.
pub(crate) struct Admitted {
    pub(crate) job: CompactionJob,
    pub(crate) io: Arc<StagingIo>,
    pub(crate) session: String,
    pub(crate) owner: String,
    /// The inputs' real size (fstat), in bytes.
    pub(crate) input_bytes: u64,
    /// When the job must be over.
    pub(crate) deadline: Instant,
    pub(crate) _permit: OwnedSemaphorePermit,
}

/// Opens table `file` of `db` (`.ldb`, else `.sst`) without following a
/// symlink; checks it is a regular file of the size the job claims.
/// `field` names the job's field in errors.
fn open_input(db: &Dir, file: &JobFile, field: &str) -> Result<(File, u64), Status> {
    let [ldb, sst] = table_names(file.number);
    let opened = match db.open_file(&ldb) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => db.open_file(&sst),
        other => other,
    };
    let opened = opened.map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Status::invalid_argument(format!(
                "{field}.number: table {} is not in the database",
                file.number
            ))
        } else {
            Status::permission_denied(format!("{field}.number: {ldb}: {}", describe(&e)))
        }
    })?;
    let id =
        file_id(&opened).map_err(|e| Status::internal(format!("{field}: fstat of {ldb}: {e}")))?;
    if !id.regular {
        return Err(Status::permission_denied(format!(
            "{field}.number: {ldb} is not a regular file"
        )));
    }
    if id.size != file.file_size {
        return Err(Status::invalid_argument(format!(
            "{field}.file_size: the job says {} bytes, the table has {}",
            file.file_size, id.size
        )));
    }
    Ok((opened, id.size))
}

/// Runs every check on `request` from a caller with `scope`; the admitted
/// job must end by `deadline`.
pub(crate) fn admit(
    inner: &WorkerInner,
    scope: &Scope,
    request: CompactRequest,
    deadline: Instant,
) -> Result<Admitted, Status> {
    let config = &inner.config;
    if !valid_session(&request.session) {
        return Err(Status::invalid_argument(
            "session: must be 32 lowercase hex digits",
        ));
    }
    let job = request
        .job
        .ok_or_else(|| Status::invalid_argument("job: the request has no job"))
        .and_then(|job| job_from_proto(job).map_err(Status::invalid_argument))?;
    let relative = inner
        .root
        .relative(&request.db_path)
        .map_err(Status::permission_denied)?;
    if !scope.allows(&relative) {
        return Err(Status::permission_denied(format!(
            "db_path: {:?} is outside this token's scope",
            request.db_path
        )));
    }
    let db = inner
        .root
        .database(&request.db_path)
        .map_err(Status::permission_denied)?;
    let mut inputs: HashMap<u64, Arc<File>> = HashMap::new();
    let mut input_bytes: u64 = 0;
    for (r, run) in job.inputs.iter().enumerate() {
        for (f, file) in run.files.iter().enumerate() {
            let field = format!("job.inputs[{r}].files[{f}]");
            let (opened, size) = open_input(&db, file, &field)?;
            input_bytes = input_bytes.checked_add(size).ok_or_else(|| {
                Status::invalid_argument("job.inputs: the sizes overflow 64 bits")
            })?;
            if input_bytes > config.max_job_bytes {
                return Err(Status::resource_exhausted(format!(
                    "job #{} reads more than this worker's --max_job_bytes {}",
                    job.id, config.max_job_bytes
                )));
            }
            inputs.insert(file.number, Arc::new(opened));
        }
    }
    let permit = inner.slots.clone().try_acquire_owned().map_err(|_| {
        Status::resource_exhausted(format!(
            "the worker runs {} jobs already (--max_jobs)",
            config.max_jobs
        ))
    })?;
    let owner = scope.owner();
    let io = inner
        .staging
        .open(&db, &request.session, owner.clone(), deadline, inputs)
        .map_err(|refusal| match refusal {
            StagingRefusal::Quota(why) => Status::resource_exhausted(why),
            StagingRefusal::Exists(why) => Status::already_exists(why),
            StagingRefusal::Io(why) => Status::internal(why),
        })?;
    Ok(Admitted {
        job,
        io,
        session: request.session,
        owner,
        input_bytes,
        deadline,
        _permit: permit,
    })
}
