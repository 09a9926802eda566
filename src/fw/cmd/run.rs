//! Running fixed-size commands and create commands with a PAS list through an [`Exec`].

use mlx5_ifc::{CmdInHeader, ViewMut};

use crate::error::{Error, Result};
use crate::io::platform::Platform;
use mlx5_ifc::View;

/// What runs one command: its whole input in, its whole output filled, the firmware's status
/// checked (a non-OK status is [`Error::Cmd`]). Implemented above the firmware pages
/// (`crate::fw::cmdq::CmdQueue`), whose wait answers the page requests a command waits for.
pub(crate) trait Exec<P: Platform> {
    /// Executes one command.
    fn exec(&self, p: &P, input: &[u8], output: &mut [u8]) -> Result<()>;
}

/// Buffer size of [`run`]: covers every fixed-size command layout of the control path.
pub(crate) const SMALL_CMD_BYTES: usize = 0x200;

/// The output of [`run`], viewable as layout `O`.
pub(crate) struct Output<O> {
    buf: [u8; SMALL_CMD_BYTES],
    _o: core::marker::PhantomData<fn() -> O>,
}

impl<O: mlx5_ifc::Layout> core::fmt::Debug for Output<O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.view() {
            Ok(v) => v.fmt(f),
            Err(_) => f.write_str(O::NAME),
        }
    }
}

impl<O: mlx5_ifc::Layout> Output<O> {
    /// The output as its layout.
    pub(crate) fn view(&self) -> Result<View<'_, O>> {
        Ok(View::new(&self.buf)?)
    }
    /// One integer field of the output.
    pub(crate) fn get(&self, f: mlx5_ifc::Field<O>) -> u64 {
        self.view().map_or(0, |v| v.get(f))
    }
}

/// Runs a fixed-size command: input layout `I` (opcode and op_mod set here, the rest by `fill`),
/// output layout `O`.
pub(crate) fn run<I, O, P, F>(
    cmd: &dyn Exec<P>,
    p: &P,
    opcode: mlx5_ifc::Opcode,
    op_mod: u16,
    fill: F,
) -> Result<Output<O>>
where
    I: mlx5_ifc::Layout,
    O: mlx5_ifc::Layout,
    P: Platform,
    F: FnOnce(&mut ViewMut<'_, I>) -> Result<()>,
{
    if I::BYTES > SMALL_CMD_BYTES || O::BYTES > SMALL_CMD_BYTES {
        return Err(Error::InvalidArgument {
            op: "command",
            field: "layout size",
            requested: I::BYTES.max(O::BYTES) as u64,
            max: SMALL_CMD_BYTES as u64,
            limit: "fixed-size command buffer",
        });
    }
    let mut input = [0u8; SMALL_CMD_BYTES];
    {
        let mut h = ViewMut::<CmdInHeader>::new(&mut input)?;
        h.set(CmdInHeader::OPCODE, opcode as u64)?
            .set(CmdInHeader::OP_MOD, u64::from(op_mod))?;
    }
    fill(&mut ViewMut::<I>::new(&mut input)?)?;
    let mut out = Output {
        buf: [0u8; SMALL_CMD_BYTES],
        _o: core::marker::PhantomData,
    };
    cmd.exec(p, &input[..I::BYTES], &mut out.buf[..O::BYTES])?;
    Ok(out)
}

/// Buffer size of [`run_create`]: a 0x110-byte create command and up to 512 PAS entries.
pub(super) const CREATE_CMD_BYTES: usize = 0x110 + crate::fw::queue::MAX_PAS * 8;

/// Runs a create command whose fixed part (layout `I`, 0x110 bytes for every CREATE_* with a
/// buffer) is followed by the PAS list of `pas`.
pub(crate) fn run_create<I, O, P, F, Q>(
    cmd: &dyn Exec<P>,
    p: &P,
    opcode: mlx5_ifc::Opcode,
    pas: Option<&Q>,
    fill: F,
) -> Result<Output<O>>
where
    Q: crate::fw::queue::PasList + ?Sized,
    I: mlx5_ifc::Layout,
    O: mlx5_ifc::Layout,
    P: Platform,
    F: FnOnce(&mut ViewMut<'_, I>) -> Result<()>,
{
    let npas = pas.map_or(0, |q| q.npages());
    let len = I::BYTES + npas * 8;
    if len > CREATE_CMD_BYTES || O::BYTES > SMALL_CMD_BYTES {
        return Err(Error::Capacity {
            what: "create command buffer",
            limit: CREATE_CMD_BYTES,
        });
    }
    let mut input = [0u8; CREATE_CMD_BYTES];
    ViewMut::<CmdInHeader>::new(&mut input)?.set(CmdInHeader::OPCODE, opcode as u64)?;
    fill(&mut ViewMut::<I>::new(&mut input)?)?;
    if let Some(q) = pas {
        q.write_pas(&mut input[I::BYTES..len])?;
    }
    let mut out = Output {
        buf: [0u8; SMALL_CMD_BYTES],
        _o: core::marker::PhantomData,
    };
    cmd.exec(p, &input[..len], &mut out.buf[..O::BYTES])?;
    Ok(out)
}
